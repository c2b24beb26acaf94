"""A written file as ContentFileParser's JSON (iceberg/file_json.py): its partition as the object
the parser reads, and the cases left to Iceberg's builders. What the JVM reads of it is pinned in
tests/integration/test_footer_metrics.py."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icesink.iceberg.file_json import TableFacts, document
from icesink.model import WrittenFile
from icesink.tasks.parquet_files import footer_file


def _footer() -> bytes:
    footers: list[pq.FileMetaData] = []
    field = pa.field("id", pa.int64(), False, {b"PARQUET:field_id": b"1"})
    pq.write_table(pa.table({"id": [3, 1, 2]}, schema=pa.schema([field])), pa.BufferOutputStream(),
                   metadata_collector=footers)  # fmt: skip
    return footer_file(footers[0])


class _Config:
    def columnMode(self, name: str) -> str:  # noqa: N802 (MetricsConfig's name)
        return "truncate(16)"


def _facts(fields: tuple[tuple[int, str], ...]) -> TableFacts:
    return TableFacts(spec_id=2, partitioned=bool(fields), partition_fields=fields, metrics_config=_Config())


def _file(partition: tuple[str | None, ...], footer: bytes | None = None) -> WrittenFile:
    return WrittenFile("s3://w/t/data/a.parquet", 3, 700, "data", partition, _footer() if footer is None else footer)


FIELDS = ((1000, "int"), (1001, "string"), (1002, "date"), (1003, "long"))


def test_a_data_file_with_its_partition_by_field_id_and_nulls_left_out() -> None:
    doc = document(_file(("7", "a b", None, "-1")), _facts(FIELDS), None)
    assert doc is not None
    assert doc["content"] == "DATA"
    assert doc["spec-id"] == 2
    assert doc["partition"] == {"1000": 7, "1001": "a b", "1003": -1}
    assert doc["file-size-in-bytes"] == 700
    assert doc["record-count"] == 3
    assert doc["lower-bounds"] == {"keys": [1], "values": ["0100000000000000"]}
    assert doc["upper-bounds"] == {"keys": [1], "values": ["0300000000000000"]}
    assert "equality-ids" not in doc


def test_an_equality_delete_file_says_its_key_ids_and_an_unpartitioned_one_no_partition() -> None:
    doc = document(_file(()), _facts(()), [1, 4])
    assert doc is not None
    assert doc["content"] == "EQUALITY_DELETES"
    assert doc["equality-ids"] == [1, 4]
    assert "partition" not in doc


@pytest.mark.parametrize(
    ("partition", "fields"),
    [
        (("__HIVE_DEFAULT_PARTITION__",), ((1000, "string"),)),  # the builders read it as null
        (("1.5",), ((1000, "decimal(9, 2)"),)),  # a type whose JSON is left to the builders
        ((" 5",), ((1000, "int"),)),  # not the string the builders parse
        (("5", "x"), ((1000, "int"),)),  # more values than fields
        (("2024-2-29",), ((1000, "date"),)),
        (("true",), ((1000, "boolean"),)),
    ],
)
def test_partition_values_it_does_not_write_leave_the_file_to_the_builders(
    partition: tuple[str, ...], fields: tuple[tuple[int, str], ...]
) -> None:
    assert document(_file(partition), _facts(fields), None) is None


def test_a_file_without_its_footer_or_with_one_pyarrow_cannot_read_is_left_to_the_builders() -> None:
    assert document(_file((), footer=b""), _facts(()), None) is None
    assert document(_file((), footer=b"PAR1 not a footer PAR1"), _facts(()), None) is None
