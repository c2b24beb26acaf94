"""Small DataFrames built by hand: Kafka records as the source hands them to a batch."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

RECORD = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
    ]
)


def kafka_records(
    spark: SparkSession, values: Sequence[bytes | str | None], keys: Sequence[bytes | str | None] | None = None
) -> DataFrame:
    """One record per value (str as UTF-8), on topic `t` partition 0 at offsets 0, 1, ..."""

    def raw(v: bytes | str | None) -> bytes | None:
        return v.encode() if isinstance(v, str) else v

    keys = keys if keys is not None else [None] * len(values)
    rows = [(raw(k), raw(v), "t", 0, i) for i, (k, v) in enumerate(zip(keys, values, strict=True))]
    return spark.createDataFrame(rows, RECORD)
