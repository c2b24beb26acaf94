"""The one-pass writer's partition values (tasks/partition_values.py): the spec's own examples and
what it leaves to Spark's path. Every transform against Iceberg Java: tests/integration/test_partition_transforms.py."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from icesink.schema.partitioning import PartitionField, from_iceberg
from icesink.tasks.partition_values import UnsupportedPartitionError, partition_strings, supported


def test_the_specs_examples_as_the_strings_the_commit_parses() -> None:
    rows = pa.table(
        {
            "id": pa.array([34, None], pa.int64()),
            "name": pa.array(["iceberg", "ice"]),
            "ts": pa.array([dt.datetime(2017, 11, 16, 22, 31, 8, tzinfo=dt.UTC), None], pa.timestamp("us", tz="UTC")),
            "flag": pa.array([True, False]),
        }
    )
    fields = [
        from_iceberg("bucket[100]", "id"),
        from_iceberg("truncate[3]", "name"),
        from_iceberg("day", "ts"),
        from_iceberg("hour", "ts"),
        from_iceberg("identity", "flag"),
        from_iceberg("void", "id"),
    ]
    got = [a.to_pylist() for a in partition_strings(rows, fields)]
    assert got == [
        ["79", None],  # bucket(100) of 34: the spec's appendix B
        ["ice", "ice"],
        ["2017-11-16", None],  # a date, as Iceberg's day transform yields
        [
            str(
                (dt.datetime(2017, 11, 16, 22, tzinfo=dt.UTC) - dt.datetime(1970, 1, 1, tzinfo=dt.UTC))
                // dt.timedelta(hours=1)
            ),
            None,
        ],
        ["true", "false"],
        [None, None],
    ]


@pytest.mark.parametrize(
    ("field", "arrow_type"),
    [
        (PartitionField("identity", "c"), pa.timestamp("us")),
        (PartitionField("identity", "c"), pa.float64()),
        (PartitionField("truncate", "c", 4), pa.binary()),
        (PartitionField("bucket", "c", 4), pa.float64()),
        (PartitionField("hour", "c"), pa.date32()),
        (PartitionField("identity", "c"), pa.struct([("a", pa.int64())])),
    ],
)
def test_what_it_leaves_to_sparks_path(field: PartitionField, arrow_type: pa.DataType) -> None:
    assert not supported(field, arrow_type)
    with pytest.raises(UnsupportedPartitionError, match="partition field"):
        partition_strings(pa.table({"c": pa.nulls(1, arrow_type)}), [field])


def test_a_missing_source_column_is_named() -> None:
    with pytest.raises(UnsupportedPartitionError, match="no column id"):
        partition_strings(pa.table({"x": [1]}), [PartitionField("bucket", "id", 4)])
