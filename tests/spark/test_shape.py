"""Reshaping decoded rows to the table's spelling and nesting (icesink.batch.shape)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DateType, IntegerType, LongType, StringType, StructField, StructType

from icesink.batch.decode import ERROR, ERROR_TYPE, ROW
from icesink.batch.shape import flat_columns, flatten, respell


def test_respell_renames_to_the_tables_spelling_and_widens(spark: SparkSession) -> None:
    parse_target = StructType([StructField("UserId", IntegerType()), StructField("Name", StringType())])
    target = StructType([StructField("userid", LongType()), StructField("name", StringType())])
    parsed = spark.createDataFrame(
        [((7, "a"), None), (None, None)], StructType([StructField(ROW, parse_target), StructField(ERROR, ERROR_TYPE)])
    )
    out = respell(parsed, target, parse_target)
    assert out.schema[ROW].dataType == target
    assert [None if r[ROW] is None else tuple(r[ROW]) for r in out.collect()] == [(7, "a"), None]


NESTED = StructType(
    [
        StructField("id", LongType()),
        StructField("User", StructType([StructField("Name", StringType()), StructField("age", IntegerType())])),
    ]
)


def flat_table(age: DataType) -> StructType:
    return StructType(
        [
            StructField("id", LongType()),
            StructField("user_name", StringType()),
            StructField("user_age", age),
            StructField("extra", StringType()),
        ]
    )


def parsed_rows(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(
        [(0, (1, ("a", 30))), (1, (2, None)), (2, None)],
        StructType([StructField("offset", LongType()), StructField(ROW, NESTED)]),
    ).withColumn(ERROR, F.lit(None).cast(ERROR_TYPE))


def test_flatten_nested_fields_to_the_tables_columns(spark: SparkSession) -> None:
    table = flat_table(LongType())
    columns = flat_columns(NESTED, "_", table, case_insensitive=True)
    assert [(c.column, c.path) for c in columns] == [
        ("id", ("id",)),
        ("user_name", ("User", "Name")),
        ("user_age", ("User", "age")),
    ]
    out = flatten(parsed_rows(spark), table, columns)
    assert out.schema[ROW].dataType == table
    rows = out.orderBy("offset").collect()
    assert [None if r[ROW] is None else tuple(r[ROW]) for r in rows] == [
        (1, "a", 30, None),
        (2, None, None, None),
        None,
    ]
    assert [r[ERROR] for r in rows] == [None, None, None]


def test_flatten_a_value_that_does_not_fit_its_column_is_an_error(spark: SparkSession) -> None:
    table = flat_table(DateType())
    out = flatten(parsed_rows(spark), table, flat_columns(NESTED, "_", table, case_insensitive=True))
    errors = [r[ERROR] for r in out.orderBy("offset").collect()]
    assert [e and (e.error_class, e.message) for e in errors] == [
        ("IncompatibleType", "field User.age is int, column user_age is date"),
        None,
        None,
    ]
