"""JSON values -> rows. Types are inferred by Spark's JSON reader in the JVM over the whole batch
(`1` and `2.5` unify to double), then every value is parsed with the table's (evolved) schema.

Values framed by Confluent's JSONSerializer (0x00 + schema id + JSON) are unframed first.
"""

from __future__ import annotations

import json

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from icesink.decode import ERROR, ROW, error, meta, no_error
from icesink.jvm import jsession, jvm
from icesink.schema_diff import CORRUPT_COLUMN, parse_schema

_PARSE_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}


def _text() -> Column:
    framed = (F.length("value") >= 5) & (F.substring("value", 1, 1) == F.unhex(F.lit("00")))
    return F.when(framed, F.expr("substring(value, 6)")).otherwise(F.col("value")).cast("string")


class PreparedJson:
    def __init__(self, records: DataFrame, schema: StructType) -> None:
        self._records = records
        self.schema = schema

    def parse(self, target: StructType) -> DataFrame:
        row = F.from_json(_text(), parse_schema(target), _PARSE_OPTIONS)
        parsed = self._records.select(*meta(), row.alias(ROW))
        corrupt = F.col(f"{ROW}.{CORRUPT_COLUMN}")
        reason = (
            F.when(
                F.col("value").isNull(),
                error("decode", "NullValue", "null value (tombstone) for an append-only table"),
            )
            .when(F.col(ROW).isNull(), error("decode", "EmptyValue", "empty value"))
            .when(corrupt.isNull(), no_error())
            .when(
                F.expr(f"try_parse_json({ROW}.{CORRUPT_COLUMN})").isNull(),
                error("decode", "JsonParseError", "not valid JSON"),
            )
            .when(
                ~F.ltrim(corrupt).startswith("{"),
                error("decode", "JsonTypeError", "a JSON value that is not an object"),
            )
            .otherwise(error("convert", "TypeMismatch", "a field's value does not fit the table's column type"))
        )
        return parsed.withColumn(ERROR, reason)


class JsonDecoder:
    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark

    def prepare(self, records: DataFrame) -> PreparedJson:
        strings = records.where(F.col("value").isNotNull()).select(_text())._jdf
        dataset = getattr(strings, "as")(jvm(self._spark).org.apache.spark.sql.Encoders.STRING())
        reader = jsession(self._spark).read()
        for k, v in _PARSE_OPTIONS.items():
            reader = reader.option(k, v)
        inferred = StructType.fromJson(json.loads(reader.json(dataset).schema().json()))
        return PreparedJson(records, StructType([f for f in inferred.fields if f.name != CORRUPT_COLUMN]))
