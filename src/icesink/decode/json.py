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

from icesink.decode import ERROR, ROW, VALUE, Source, debezium, error, no_error
from icesink.decode.debezium import EnvelopeSpec
from icesink.jvm import jsession, jvm
from icesink.schema_diff import CORRUPT_COLUMN, parse_schema

_ENVELOPE = "__icesink_envelope"
_PARSE_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}


def _text(src: Source) -> Column:
    data = F.col(src.column)
    framed = (F.length(data) >= 5) & (F.substring(data, 1, 1) == F.unhex(F.lit("00")))
    return F.when(framed, F.expr(f"substring({src.column}, 6)")).otherwise(data).cast("string")


class PreparedJson:
    def __init__(self, records: DataFrame, inferred: StructType, envelope: EnvelopeSpec | None, src: Source) -> None:
        self._records = records
        self._src = src
        self._inferred = inferred
        self._envelope = envelope
        self.schema = debezium.row_type(inferred, envelope) if envelope is not None else inferred

    def parse(self, target: StructType) -> DataFrame:
        if self._envelope is None:
            row = F.from_json(_text(self._src), parse_schema(target), _PARSE_OPTIONS)
            parsed = self._records.withColumn(ROW, row)
            return parsed.withColumn(ERROR, _reason(self._src, ROW, no_error()))
        # before/after are parsed straight as the target's row columns: no cast needed after.
        env_type = debezium.envelope_parse_type(self._inferred, target, self._envelope)
        env = F.from_json(_text(self._src), parse_schema(env_type), _PARSE_OPTIONS)
        parsed = self._records.withColumn(_ENVELOPE, env)
        row = debezium.row(F.col(_ENVELOPE), env_type, target, self._envelope, _as_is)
        reason = _reason(self._src, _ENVELOPE, debezium.envelope_error(F.col(_ENVELOPE), env_type))
        return parsed.withColumn(ROW, row).withColumn(ERROR, reason).drop(_ENVELOPE)


def _as_is(col: Column, source: DataType, target: DataType) -> Column:
    return col if source == target else col.cast(target)


def _reason(src: Source, parsed: str, ok: Column) -> Column:
    corrupt = F.col(f"{parsed}.{CORRUPT_COLUMN}")
    tombstone = f"null {src.column} (tombstone) for an append-only table"
    return (
        F.when(F.col(src.column).isNull(), error("decode", "NullValue", tombstone))
        .when(F.col(parsed).isNull(), error("decode", "EmptyValue", "empty value"))
        .when(corrupt.isNull(), ok)
        .when(F.try_parse_json(corrupt).isNull(), error("decode", "JsonParseError", "not valid JSON"))
        .when(~F.ltrim(corrupt).startswith("{"), error("decode", "JsonTypeError", "a JSON value that is not an object"))
        .otherwise(error("convert", "TypeMismatch", "a field's value does not fit the table's column type"))
    )


class JsonDecoder:
    def __init__(self, spark: SparkSession, envelope: EnvelopeSpec | None = None, src: Source = VALUE) -> None:
        self._spark = spark
        self._envelope = envelope
        self._src = src

    def plan_column(self) -> None:
        return None

    def prepare(self, records: DataFrame, planned: list[Any] | None = None) -> PreparedJson:
        strings = records.where(F.col(self._src.column).isNotNull()).select(_text(self._src))._jdf
        dataset = getattr(strings, "as")(jvm(self._spark).org.apache.spark.sql.Encoders.STRING())
        reader = jsession(self._spark).read()
        # A field that is null in every record of the batch says nothing about its type: it
        # becomes a column once a record carries a value (else it would become a string column).
        for k, v in {**_PARSE_OPTIONS, "dropFieldIfAllNull": "true"}.items():
            reader = reader.option(k, v)
        inferred = StructType.fromJson(json.loads(reader.json(dataset).schema().json()))
        fields = [f for f in inferred.fields if f.name != CORRUPT_COLUMN]
        return PreparedJson(records, StructType(fields), self._envelope, self._src)
