"""Debezium envelopes -> rows with an operation column (icesink.batch.decode.debezium)."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from icesink.batch.decode.avro import align
from icesink.batch.decode.debezium import EnvelopeSpec, envelope_error, row, row_type

IMAGE = StructType([StructField("id", IntegerType()), StructField("email", StringType())])
SOURCE = StructType([StructField("lsn", LongType()), StructField("db", StringType())])
ENVELOPE = StructType(
    [
        StructField("before", IMAGE),
        StructField("after", IMAGE),
        StructField("source", SOURCE),
        StructField("op", StringType()),
    ]
)
WRAPPED = StructType([StructField("schema", StringType()), StructField("payload", ENVELOPE)])


def test_rows_operations_source_columns_and_envelope_errors(spark: SparkSession) -> None:
    spec = EnvelopeSpec(operation_column="_op", source_columns=("lsn",))
    target = StructType(
        [StructField("id", LongType()), *row_type(ENVELOPE, spec).fields[1:], StructField("x", StringType())]
    )
    assert target.fieldNames() == ["id", "email", "_op", "_source_lsn", "x"]
    events = [
        (None, (1, "a@x"), (10, "shop"), "r"),
        ((1, "a@x"), (1, "b@x"), (11, "shop"), "u"),
        ((1, None), None, (12, "shop"), "d"),
        (None, (2, "c@x"), (13, "shop"), "c"),
        (None, (3, "d@x"), (14, "shop"), "t"),  # truncate: not a row change
        (None, None, (15, "shop"), "c"),
    ]
    # JSON carries the envelope in a schema/payload wrapper: the same rows come out of it.
    df = spark.createDataFrame([(i, ("{}", e)) for i, e in enumerate(events)], f"i int, e {WRAPPED.simpleString()}")
    out = df.select(
        "i",
        row(F.col("e"), WRAPPED, target, spec, align).alias("row"),
        envelope_error(F.col("e"), WRAPPED).alias("err"),
    )
    got = [(tuple(r.row), r.err and r.err.message) for r in out.orderBy("i").collect()]
    assert got == [
        ((1, "a@x", "I", 10, None), None),
        ((1, "b@x", "U", 11, None), None),
        ((1, None, "D", 12, None), None),
        ((2, "c@x", "I", 13, None), None),
        ((3, "d@x", None, 14, None), "unknown op t"),
        ((None, None, "I", 15, None), "op c without its row image"),
    ]
