"""Aligning a decoded value to the table's type (icesink.batch.decode.avro.align)."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, LongType, MapType, StringType, StructField, StructType

from icesink.batch.decode.avro import align


def test_align_takes_fields_by_name_nulls_missing_ones_and_widens(spark: SparkSession) -> None:
    item = StructType([StructField("n", IntegerType()), StructField("gone", StringType())])
    source = StructType(
        [
            StructField("b", IntegerType()),
            StructField("a", StringType()),
            StructField("items", ArrayType(item)),
            StructField("tags", MapType(StringType(), item)),
        ]
    )
    wide = StructType([StructField("n", LongType()), StructField("new", StringType())])
    target = StructType(
        [
            StructField("a", StringType()),
            StructField("b", LongType()),
            StructField("c", StringType()),
            StructField("items", ArrayType(wide)),
            StructField("tags", MapType(StringType(), wide)),
        ]
    )
    df = spark.createDataFrame(
        [(0, (1, "x", [(2, "g")], {"k": (3, "g")})), (1, None)], f"i int, v {source.simpleString()}"
    )
    out = df.select("i", align(F.col("v"), source, target).alias("v"))
    assert out.schema["v"].dataType == target
    rows = [r.v for r in out.orderBy("i").collect()]
    assert rows[1] is None
    assert rows[0].asDict(recursive=True) == {
        "a": "x",
        "b": 1,
        "c": None,
        "items": [{"n": 2, "new": None}],
        "tags": {"k": {"n": 3, "new": None}},
    }
