"""The one-pass writer's partition values (tasks/partition_values.py, iceberg-rust's transforms)
against Iceberg Java's `Transforms` in the driver JVM: each string it renders, parsed back the way
the commit parses it (`Conversions.fromPartitionString` with the field's result type), is the
value Java's transform gives. A change of either library that moves a row to another partition
than Spark's path (and every other Iceberg writer) puts it in fails here."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from icesink.schema.partitioning import PartitionField, from_iceberg
from icesink.tasks.partition_values import partition_strings

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
TIMES = [
    dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),  # before the epoch: floor, not truncation
    dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
    dt.datetime(2262, 4, 11, 23, 47, tzinfo=dt.UTC),
]
DATES = [dt.date(2024, 2, 29), dt.date(1969, 12, 31), dt.date(1970, 1, 1), dt.date(1900, 1, 1)]
STRINGS = ["iceberg", "", "ü-straße", "a", "日本語のテキスト"]
DECIMALS = [decimal.Decimal(x) for x in ("12.34", "-12.34", "0.00", "-0.01", "99999999.99")]
INTS = [0, 1, -1, 34, 2**31 - 1, -(2**31)]
LONGS = [0, 34, -1, 2**63 - 1, -(2**63), 1_700_000_000_000]
UUIDS = [uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)]


def micros(t: dt.datetime) -> int:
    return (t - EPOCH) // dt.timedelta(microseconds=1)


# (Iceberg type, Arrow type, values, the value as Java's transforms take it)
CASES: dict[str, tuple[str, pa.DataType, list[Any], Callable[[Any, Any], Any]]] = {
    "int": ("int", pa.int32(), INTS, lambda j, v: j.java.lang.Integer.valueOf(str(v))),
    "long": ("long", pa.int64(), LONGS, lambda j, v: v),
    "string": ("string", pa.string(), STRINGS, lambda j, v: v),
    "decimal": ("decimal(10, 2)", pa.decimal128(10, 2), DECIMALS, lambda j, v: j.java.math.BigDecimal(str(v))),
    "date": ("date", pa.date32(), DATES, lambda j, v: j.java.lang.Integer.valueOf(str((v - EPOCH.date()).days))),
    "timestamp": ("timestamp", pa.timestamp("us"), [t.replace(tzinfo=None) for t in TIMES], lambda j, v: v),
    "timestamptz": ("timestamptz", pa.timestamp("us", tz="UTC"), TIMES, lambda j, v: v),
    "uuid": ("uuid", pa.binary(16), UUIDS, lambda j, v: j.java.util.UUID.fromString(str(v))),
}
PINNED = [
    *[("bucket[16]", t) for t in ("int", "long", "string", "decimal", "date", "timestamp", "timestamptz", "uuid")],
    ("bucket[1000]", "long"),
    ("truncate[3]", "string"),
    ("truncate[10]", "decimal"),
    ("truncate[10]", "int"),
    ("truncate[100]", "long"),
    *[(t, "timestamptz") for t in ("year", "month", "day", "hour")],
    *[(t, "timestamp") for t in ("day", "hour")],
    *[(t, "date") for t in ("year", "month", "day")],
    *[("identity", t) for t in ("int", "long", "string", "decimal", "date")],
    ("void", "long"),
]


def arrow_values(kind: str) -> pa.Array:
    _, arrow_type, values, _ = CASES[kind]
    if kind == "uuid":
        return pa.array([u.bytes for u in values], pa.binary(16))
    return pa.array(values, arrow_type)


LONG_KINDS = ("long", "timestamp", "timestamptz")


def java_results(spark: SparkSession, bound: Any, kind: str, values: list[Any]) -> list[Any]:
    """Java's transform of each value. py4j hands a small Python int over as an Integer, which a
    transform of longs refuses: those go in as a long[] boxed inside the JVM."""
    jvm: Any = spark._jvm
    if kind not in LONG_KINDS:
        return [bound.apply(CASES[kind][3](jvm, v)) for v in values]
    if kind != "long":
        values = [micros(v if v.tzinfo is not None else v.replace(tzinfo=dt.UTC)) for v in values]
    longs = spark.sparkContext._gateway.new_array(jvm.long, len(values))  # type: ignore[union-attr]
    for i, v in enumerate(values):
        longs[i] = v
    found = (
        jvm.java.util.stream.LongStream.of(longs).boxed().map(bound).collect(jvm.java.util.stream.Collectors.toList())
    )
    return [found.get(i) for i in range(found.size())]


@pytest.mark.parametrize(("transform", "kind"), PINNED, ids=[f"{t}-{k}" for t, k in PINNED])
def test_partition_values_are_iceberg_javas(spark: SparkSession, transform: str, kind: str) -> None:
    jvm = spark._jvm
    assert jvm is not None
    ice = jvm.org.apache.iceberg
    iceberg_type = ice.types.Types.fromPrimitiveString(CASES[kind][0])
    java_transform = ice.transforms.Transforms.fromString(transform)
    bound = java_transform.bind(iceberg_type)
    result_type = java_transform.getResultType(iceberg_type)
    field: PartitionField = from_iceberg(transform, "c")
    values = arrow_values(kind)
    [rendered] = partition_strings(pa.table({"c": values}), [field])
    expected_values = java_results(spark, bound, kind, CASES[kind][2])
    for value, text, expected in zip(CASES[kind][2], rendered.to_pylist(), expected_values, strict=True):
        parsed = ice.types.Conversions.fromPartitionString(result_type, text) if text is not None else None
        if expected is None:
            assert parsed is None, (transform, kind, value, text)
        else:
            assert parsed is not None, (transform, kind, value, text)
            # py4j hands over ints and strings as Python values, BigDecimals as Java objects.
            same = expected.equals(parsed) if hasattr(expected, "equals") else expected == parsed
            assert same, (transform, kind, value, text, str(expected))
    [nulls] = partition_strings(pa.table({"c": pa.nulls(2, values.type)}), [field])
    assert nulls.to_pylist() == [None, None], "a null source value is a null partition value"
