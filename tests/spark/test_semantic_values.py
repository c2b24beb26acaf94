"""Debezium's semantic types converted by the one-pass tasks (tasks/semantic_values.py) against
Spark's path's conversions (batch/decode/semantic.py): the same value for every value the tasks
take, and every value Spark's path makes a dead letter (null after conversion) declined."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from icesink.batch.decode import semantic
from icesink.schema.connect import VARIABLE_DECIMAL, ZONED_TIMESTAMP
from icesink.tasks import semantic_values
from icesink.tasks.decode_json import DeclinedValueError

VSD = StructType([StructField("scale", IntegerType(), False), StructField("value", BinaryType(), False)])


def _vsd(unscaled: int, scale: int) -> dict[str, Any]:
    return {"scale": scale, "value": unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)}


NANOS_NEAR_2_53 = 1_700_000_000_123_456_999  # a double rounds it up to ...457_024 ns
CASES: list[tuple[str, Any, pa.DataType, list[Any]]] = [
    ("io.debezium.time.Date", IntegerType(), pa.int32(), [0, -1, 2_932_896, -719_162, None]),
    ("io.debezium.time.Timestamp", LongType(), pa.int64(), [0, -1, 1_700_000_000_123, 253_402_300_799_999, None]),
    ("io.debezium.time.MicroTimestamp", LongType(), pa.int64(), [0, -1, 1_700_000_000_123_456, None]),
    ("io.debezium.time.NanoTimestamp", LongType(), pa.int64(), [0, -1, -1_001, 999, NANOS_NEAR_2_53, None]),
    ("io.debezium.time.Time", IntegerType(), pa.int32(), [0, 86_399_999, None]),
    ("io.debezium.time.MicroTime", LongType(), pa.int64(), [0, 86_399_999_999, None]),
    (
        ZONED_TIMESTAMP, StringType(), pa.string(),
        ["2024-01-02T03:04:05Z", "2024-01-02T03:04:05.5+02:00", "1969-12-31T23:59:59.999999-05:30",
         "2024-02-29T00:00:00.123Z", None],
    ),
    (
        VARIABLE_DECIMAL, VSD, pa.struct([("scale", pa.int32()), ("value", pa.binary())]),
        [_vsd(12_345_678, 3), _vsd(-5, 2), _vsd(5, -2), _vsd(10**19, 0), _vsd(1, 18), _vsd(10, 19), None],
    ),
    (  # no negative scale: converted a whole array at a time (semantic_values._variable_decimals_whole)
        VARIABLE_DECIMAL, VSD, pa.struct([("scale", pa.int32()), ("value", pa.binary())]),
        [_vsd(12_345_678, 3), _vsd(-5, 2), _vsd(10**19, 0), _vsd(-(10**20) + 1, 0), _vsd(1, 18), _vsd(10, 19),
         _vsd(-7 * 10**29, 30), None],
    ),
]  # fmt: skip


def sparks(spark: SparkSession, name: str, spark_type: Any, values: list[Any]) -> list[Any]:
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], StructType(
        [StructField("i", LongType()), StructField("raw", spark_type)]
    ))  # fmt: skip
    converted = frame.select("i", semantic.CONVERSIONS[name][1](F.col("raw")).alias("v")).orderBy("i")
    return [r.v for r in converted.collect()]


def _same(mine: Any, theirs: Any) -> bool:
    if isinstance(mine, dt.datetime) and mine.tzinfo is not None:  # Spark's is UTC-naive (the session's zone)
        return mine.astimezone(dt.UTC).replace(tzinfo=None) == theirs
    if isinstance(mine, Decimal):
        return mine == theirs
    return bool(mine == theirs)


@pytest.mark.parametrize(
    ("name", "spark_type", "arrow_type", "values"),
    CASES,
    ids=[f"{c[0].split('.')[-1]}-{i}" for i, c in enumerate(CASES)],
)
def test_the_tasks_convert_as_sparks_path_does(
    spark: SparkSession, name: str, spark_type: Any, arrow_type: pa.DataType, values: list[Any]
) -> None:
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    mine = semantic_values.CONVERSIONS[name](pa.array(values, arrow_type)).to_pylist()
    theirs = sparks(spark, name, spark_type, values)
    for value, a, b in zip(values, mine, theirs, strict=True):
        assert _same(a, b), (name, value, a, b)


@pytest.mark.parametrize(
    ("name", "spark_type", "arrow_type", "value"),
    [
        (VARIABLE_DECIMAL, VSD, pa.struct([("scale", pa.int32()), ("value", pa.binary())]), _vsd(11, 19)),
        (VARIABLE_DECIMAL, VSD, pa.struct([("scale", pa.int32()), ("value", pa.binary())]), _vsd(10**20, 0)),
        # 39 digits unscaled, a value decimal(38, 18) holds: Spark's path reads the digits into decimal(38, 0)
        (VARIABLE_DECIMAL, VSD, pa.struct([("scale", pa.int32()), ("value", pa.binary())]), _vsd(10**38, 30)),
        (VARIABLE_DECIMAL, VSD, pa.struct([("scale", pa.int32()), ("value", pa.binary())]), _vsd(-(10**38), 30)),
        (ZONED_TIMESTAMP, StringType(), pa.string(), "2024-13-01T00:00:00Z"),
        (ZONED_TIMESTAMP, StringType(), pa.string(), "soon"),
    ],
)
def test_what_sparks_path_makes_a_dead_letter_the_tasks_decline(
    spark: SparkSession, name: str, spark_type: Any, arrow_type: pa.DataType, value: Any
) -> None:
    assert sparks(spark, name, spark_type, [value]) == [None], "a dead letter on Spark's path"
    with pytest.raises(DeclinedValueError):
        semantic_values.CONVERSIONS[name](pa.array([value], arrow_type))
