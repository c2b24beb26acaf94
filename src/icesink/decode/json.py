"""JSON values -> rows. Types are inferred by Spark's JSON reader in the JVM over the whole batch
(`1` and `2.5` unify to double), then every value is parsed with the table's (evolved) schema.

Values framed by Confluent's JSONSerializer (0x00 + schema id + JSON) are unframed first.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from icesink.decode import ERROR, ROW, debezium, error, meta, no_error
from icesink.decode.debezium import EnvelopeSpec
from icesink.jvm import jsession, jvm
from icesink.schema_diff import CORRUPT_COLUMN, parse_schema

_ENVELOPE = "__icesink_envelope"
_PARSE_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}


def _text() -> Column:
    framed = (F.length("value") >= 5) & (F.substring("value", 1, 1) == F.unhex(F.lit("00")))
    return F.when(framed, F.expr("substring(value, 6)")).otherwise(F.col("value")).cast("string")


class PreparedJson:
    def __init__(self, records: DataFrame, inferred: StructType, envelope: EnvelopeSpec | None) -> None:
        self._records = records
        self._inferred = inferred
        self._envelope = envelope
        self.schema = debezium.row_type(inferred, envelope) if envelope is not None else inferred

    def parse(self, target: StructType) -> DataFrame:
        if self._envelope is None:
            row = F.from_json(_text(), parse_schema(target), _PARSE_OPTIONS)
            parsed = self._records.select(*meta(), row.alias(ROW))
            return parsed.withColumn(ERROR, _reason(ROW, no_error()))
        # before/after are parsed straight as the target's row columns: no cast needed after.
        env_type = debezium.envelope_parse_type(self._inferred, target, self._envelope)
        env = F.from_json(_text(), parse_schema(env_type), _PARSE_OPTIONS)
        parsed = self._records.select(*meta(), env.alias(_ENVELOPE))
        row = debezium.row(F.col(_ENVELOPE), env_type, target, self._envelope, _as_is)
        reason = _reason(_ENVELOPE, debezium.envelope_error(F.col(_ENVELOPE), env_type))
        return parsed.withColumn(ROW, row).withColumn(ERROR, reason).drop(_ENVELOPE)


def _as_is(col: Column, source: DataType, target: DataType) -> Column:
    return col if source == target else col.cast(target)


def _reason(parsed: str, ok: Column) -> Column:
    corrupt = F.col(f"{parsed}.{CORRUPT_COLUMN}")
    return (
        F.when(F.col("value").isNull(), error("decode", "NullValue", "null value (tombstone) for an append-only table"))
        .when(F.col(parsed).isNull(), error("decode", "EmptyValue", "empty value"))
        .when(corrupt.isNull(), ok)
        .when(F.try_parse_json(corrupt).isNull(), error("decode", "JsonParseError", "not valid JSON"))
        .when(~F.ltrim(corrupt).startswith("{"), error("decode", "JsonTypeError", "a JSON value that is not an object"))
        .otherwise(error("convert", "TypeMismatch", "a field's value does not fit the table's column type"))
    )


class JsonDecoder:
    def __init__(self, spark: SparkSession, envelope: EnvelopeSpec | None = None) -> None:
        self._spark = spark
        self._envelope = envelope

    def plan_column(self) -> None:
        return None

    def prepare(self, records: DataFrame, planned: list[Any] | None = None) -> PreparedJson:
        strings = records.where(F.col("value").isNotNull()).select(_text())._jdf
        dataset = getattr(strings, "as")(jvm(self._spark).org.apache.spark.sql.Encoders.STRING())
        reader = jsession(self._spark).read()
        for k, v in _PARSE_OPTIONS.items():
            reader = reader.option(k, v)
        inferred = StructType.fromJson(json.loads(reader.json(dataset).schema().json()))
        return PreparedJson(
            records, StructType([f for f in inferred.fields if f.name != CORRUPT_COLUMN]), self._envelope
        )
