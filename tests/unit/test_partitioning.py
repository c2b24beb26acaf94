from __future__ import annotations

import pytest

from icesink.schema.partitioning import PartitionField, check_within_keys, from_iceberg, parse_partition_field


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("region", PartitionField("identity", "region")),
        ("identity(region)", PartitionField("identity", "region")),
        ("bucket(16, id)", PartitionField("bucket", "id", 16)),
        (" truncate( 4 ,name ) ", PartitionField("truncate", "name", 4)),
        ("days(ts)", PartitionField("day", "ts")),
        ("hour(ts)", PartitionField("hour", "ts")),
        ("months(d)", PartitionField("month", "d")),
        ("years(d)", PartitionField("year", "d")),
    ],
)
def test_config_forms_parse(text: str, field: PartitionField) -> None:
    assert parse_partition_field(text) == field


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bucket(id)", r"bucket\(N, column\)"),
        ("days(7, ts)", r"day\(column\)"),
        ("zorder(a)", "unknown transform 'zorder'"),
        ("bucket(0, id)", "at least 1"),
        ("a.b", "is not a partition field"),
        ("bucket(16, id); drop", "is not a partition field"),
    ],
)
def test_bad_forms_are_refused_with_the_entry(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_partition_field(text)


def test_iceberg_forms_read_back() -> None:
    assert from_iceberg("bucket[16]", "id") == PartitionField("bucket", "id", 16)
    assert from_iceberg("day", "ts") == PartitionField("day", "ts")
    assert from_iceberg("identity", "region") == PartitionField("identity", "region")
    assert str(from_iceberg("truncate[4]", "name")) == "truncate(4, name)"
    # A field dropped by a partition evolution: its files' values are null.
    assert from_iceberg("void", "x") == PartitionField("void", "x")
    with pytest.raises(ValueError, match="existing specs only"):
        parse_partition_field("void(x)")
    with pytest.raises(ValueError, match="gone"):
        from_iceberg("gone", "x")


def test_partitions_must_be_functions_of_the_key() -> None:
    check_within_keys(["bucket(16, id)", "region"], ["id", "region"])
    check_within_keys([], ["id"])
    with pytest.raises(ValueError, match=r"day\(ts\) use column\(s\) \['ts'\] that are not key columns \['id'\]"):
        check_within_keys(["bucket(4, id)", "days(ts)"], ["id"])
