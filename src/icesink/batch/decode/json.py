"""JSON values (or keys) -> rows.

Plain JSON: types are inferred by Spark's JSON reader in the JVM over the whole batch (`1` and
`2.5` unify to double), then every value is parsed with the table's (evolved) schema.

Kafka Connect JSON (`{"schema": ..., "payload": ...}`, JsonConverter with schemas on, Debezium's
default): the record's own Connect schema decides the types, not inference (see `connect`): a
Decimal becomes a decimal, exactly; a Debezium timestamp a timestamp. The batch's distinct schemas
are found in one aggregate, and each record is parsed with its own schema (a CASE on the schema's
hash evaluates only the matching branch), like Avro records with their writer schemas. Once a
decoder has seen Connect schemas it looks for them first, so such topics pay no inference pass.

Values framed by Confluent's JSONSerializer (0x00 + schema id + JSON) are unframed first.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType, StructField, StructType

from icesink.batch.decode import ERROR, ROW, VALUE, Source, connect, debezium, error, fenced, no_error
from icesink.batch.decode.avro import align
from icesink.batch.decode.debezium import EnvelopeSpec
from icesink.iceberg.jvm import jsession, jvm
from icesink.schema.evolution import CORRUPT_COLUMN, conflicts, merged, parse_schema

log = logging.getLogger(__name__)
_PLAIN = "__icesink_plain"
_HASH = "__icesink_schema_hash"
_CONNECT = "__icesink_connect"
_CONVERTED = "__icesink_converted"
_PARSE_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}


def _text(src: Source) -> Column:
    data = F.col(src.column)
    framed = (F.length(data) >= 5) & (F.substring(data, 1, 1) == F.unhex(F.lit("00")))
    return F.when(framed, F.expr(f"substring({src.column}, 6)")).otherwise(data).cast("string")


def _schema_text(src: Source) -> Column:
    """The record's top-level `schema` value as JSON text (null when it has none)."""
    return F.get_json_object(_text(src), "$.schema")


def _schema_hash(src: Source) -> Column:
    text = _schema_text(src)
    return F.when(text.isNotNull(), F.xxhash64(text))


@dataclass(frozen=True)
class _Connect:
    """One distinct Connect schema of the batch: usable (`schema`, `row`) or not (`problem`)."""

    hash: int
    schema: connect.ConnectSchema | None
    row: StructType  # the row type its records give (for envelopes: the image + operation/source columns)
    problem: str | None = None


def _looks_like_connect(inferred: StructType) -> bool:
    names = inferred.fieldNames()
    if "schema" not in names or "payload" not in names:
        return False
    schema = inferred["schema"].dataType
    return isinstance(schema, StructType) and "type" in schema.fieldNames()


class PreparedJson:
    def __init__(
        self,
        records: DataFrame,
        inferred: StructType | None,
        schemas: list[_Connect],
        envelope: EnvelopeSpec | None,
        src: Source,
    ) -> None:
        self._records = records
        self._src = src
        self._inferred = inferred  # None: every record carries a Connect schema
        self._schemas = schemas
        self._envelope = envelope
        self.schema = StructType([])
        # Why the records without a Connect schema cannot be read, when others of the batch can.
        self._plain_problem: str | None = None
        if inferred is not None:
            try:
                self.schema = debezium.row_type(inferred, envelope) if envelope is not None else inferred
            except debezium.EnvelopeError as e:
                if not schemas:
                    raise
                self._plain_problem = f"a record without a Connect schema: {e}"
        for s in schemas:
            if s.schema is not None:
                self.schema = merged(self.schema, s.row)

    def parse(self, target: StructType) -> DataFrame:
        columns = self._records.columns
        if not self._schemas:
            plain, row, reason = self._plain(target)
            return self._records.withColumn(_PLAIN, plain).select(*columns, row.alias(ROW), reason.alias(ERROR))
        h = F.col(_HASH)
        decoded, converted = [], []
        for i, s in enumerate(self._schemas):
            if s.schema is None:
                continue
            parse_type = StructType(
                [StructField("payload", s.schema.parse_type, True), StructField(CORRUPT_COLUMN, StringType(), True)]
            )
            value = F.from_json(_text(self._src), parse_type, _PARSE_OPTIONS)
            decoded.append(F.when(h == F.lit(s.hash), value).alias(f"{_CONNECT}{i}"))
            # A column of its own: the row and the checks below refer to it many times, and an
            # expression repeated in each reference would grow the plan past the driver's memory.
            converted.append(connect.convert(F.col(f"{_CONNECT}{i}.payload"), s.schema.root).alias(f"{_CONVERTED}{i}"))
        connect_hashes = [F.lit(s.hash) for s in self._schemas]
        is_connect = F.coalesce(h.isin(*connect_hashes), F.lit(False))
        tombstone = F.col(self._src.column).isNull()
        out: Column = F.lit(None).cast(target)
        reason = F.when(tombstone, _null_value(self._src))
        step = self._records.withColumn(_HASH, _schema_hash(self._src))
        for i, s in enumerate(self._schemas):
            is_s = h == F.lit(s.hash)
            if s.schema is None:
                reason = reason.when(is_s, error("schema", "UnsupportedConnectSchema", s.problem or ""))
                continue
            s_row, s_reason = self._connect_row(F.col(f"{_CONNECT}{i}"), F.col(f"{_CONVERTED}{i}"), s, s.schema, target)
            out = F.when(is_s, s_row).otherwise(out)
            reason = reason.when(is_s, s_reason)
        if self._plain_problem is not None:
            reason = reason.otherwise(error("decode", "DebeziumEnvelopeError", self._plain_problem))
        elif self._inferred is not None:
            plain, p_row, p_reason = self._plain(target)
            step = step.withColumn(_PLAIN, F.when(~is_connect, plain))
            out = F.when(~is_connect, p_row).otherwise(out)
            # Every Connect record met its schema's branch above: what is left has none.
            reason = reason.otherwise(p_reason)
        else:
            reason = reason.otherwise(_unexpected())
        plain_column = [_PLAIN] if self._inferred is not None and self._plain_problem is None else []
        step = step.select(*columns, _HASH, *plain_column, *decoded)
        step = step.select("*", *converted)
        return step.select(*columns, out.alias(ROW), fenced(reason).alias(ERROR))

    def _plain(self, target: StructType) -> tuple[Column, Column, Column]:
        """The parsed helper column, the row and the error of records without a Connect schema."""
        assert self._inferred is not None or not self._schemas
        inferred = self._inferred if self._inferred is not None else StructType([])
        if self._envelope is None:
            plain = F.from_json(_text(self._src), parse_schema(target), _PARSE_OPTIONS)
            row = F.col(_PLAIN)
            if self._schemas:
                # Typed as the Connect branches' rows: without the corrupt-record column.
                fields = [row[f.name].alias(f.name) for f in target.fields]
                row = F.when(row.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*fields))
            return plain, row, _reason(self._src, _PLAIN, no_error())
        # before/after are parsed straight as the target's row columns: no cast needed after.
        env_type = debezium.envelope_parse_type(inferred, target, self._envelope)
        plain = F.from_json(_text(self._src), parse_schema(env_type), _PARSE_OPTIONS)
        row = debezium.row(F.col(_PLAIN), env_type, target, self._envelope, _as_is)
        reason = _reason(self._src, _PLAIN, debezium.envelope_error(F.col(_PLAIN), env_type))
        return plain, row, reason

    def _connect_row(
        self, parsed: Column, value: Column, s: _Connect, schema: connect.ConnectSchema, target: StructType
    ) -> tuple[Column, Column]:
        """The row and the error of records parsed with Connect schema `s` (`value`: converted)."""
        problems = conflicts(target, s.row)
        if problems:
            return F.lit(None).cast(target), error("convert", "IncompatibleType", "; ".join(problems))
        payload = parsed["payload"]
        corrupt = parsed[CORRUPT_COLUMN]
        reason = (
            F.when(parsed.isNull(), error("decode", "EmptyValue", "empty value"))
            .when(
                corrupt.isNotNull() & F.try_parse_json(corrupt).isNull(),
                error("decode", "JsonParseError", "not valid JSON"),
            )
            .when(
                corrupt.isNotNull(),
                error("convert", "TypeMismatch", "the payload does not match the record's own Connect schema"),
            )
            .when(payload.isNull(), error("decode", "NullPayload", "a Connect schema with a null payload"))
        )
        lost = connect.lost(payload, value, schema.root)
        if lost is not None:
            reason = reason.when(
                lost,
                error(
                    "convert",
                    "ConversionFailed",
                    "a decimal or timestamp does not convert exactly to its column type "
                    "(it would overflow or round, or does not parse)",
                ),
            )
        if self._envelope is not None:
            value_type = schema.result_type
            row = debezium.row(value, value_type, target, self._envelope, align)
            return row, reason.otherwise(debezium.envelope_error(value, value_type))
        return align(value, schema.result_type, target), reason.otherwise(no_error())


def _as_is(col: Column, source: DataType, target: DataType) -> Column:
    return col if source == target else col.cast(target)


def _null_value(src: Source) -> Column:
    return error("decode", "NullValue", f"null {src.column} (tombstone) for an append-only table")


def _unexpected() -> Column:
    return error("schema", "UnexpectedSchema", "a Connect schema not seen while planning the batch")


def _reason(src: Source, parsed: str, ok: Column) -> Column:
    corrupt = F.col(f"{parsed}.{CORRUPT_COLUMN}")
    return (
        F.when(F.col(src.column).isNull(), _null_value(src))
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
        # Set once a batch carried Connect schemas: later batches look for them first.
        self._connect_seen = False
        # Parsed Connect schemas by their text (Debezium repeats one schema in every record).
        self._parsed: dict[str, _Connect] = {}

    def plan_column(self) -> None:
        return None

    def prepare(self, records: DataFrame, planned: list[Any] | None = None) -> PreparedJson:
        present = records.where(F.col(self._src.column).isNotNull())
        if not self._connect_seen:
            inferred = self._infer(present)
            if not _looks_like_connect(inferred):
                return PreparedJson(records, inferred, [], self._envelope, self._src)
            self._connect_seen = True
        schemas, others = self._connect_schemas(present)
        inferred_rest = None
        if others or not schemas:
            hashes = [F.lit(s.hash) for s in schemas]
            h = _schema_hash(self._src)
            rest = present.where(h.isNull() | ~h.isin(*hashes)) if hashes else present
            inferred_rest = self._infer(rest)
        return PreparedJson(records, inferred_rest, schemas, self._envelope, self._src)

    def _infer(self, records: DataFrame) -> StructType:
        strings = records.select(_text(self._src))._jdf
        dataset = getattr(strings, "as")(jvm(self._spark).org.apache.spark.sql.Encoders.STRING())
        reader = jsession(self._spark).read()
        # A field that is null in every record of the batch says nothing about its type: it
        # becomes a column once a record carries a value (else it would become a string column).
        for k, v in {**_PARSE_OPTIONS, "dropFieldIfAllNull": "true"}.items():
            reader = reader.option(k, v)
        inferred = StructType.fromJson(json.loads(reader.json(dataset).schema().json()))
        return StructType([f for f in inferred.fields if f.name != CORRUPT_COLUMN])

    def _connect_schemas(self, present: DataFrame) -> tuple[list[_Connect], int]:
        """The batch's distinct Connect schemas (one aggregate), and how many records carry none."""
        text = _schema_text(self._src)
        rows = (
            present.groupBy(_schema_hash(self._src).alias("h"))
            .agg(F.first(text).alias("s"), F.count(F.lit(1)).alias("n"))
            .collect()
        )
        schemas, others = [], 0
        for r in rows:
            if r.h is None or not connect.is_connect_schema(r.s):
                others += r.n
                continue
            schemas.append(self._schema(int(r.h), r.s))
        log.debug("connect schemas in batch: %d; records without one: %d", len(schemas), others)
        return schemas, others

    def _schema(self, h: int, text: str) -> _Connect:
        found = self._parsed.get(text)  # the hash is the text's: the same text, the same hash
        if found is not None:
            return found
        try:
            schema = connect.parse_schema(text)
            row = schema.result_type
            if self._envelope is not None:
                row = debezium.row_type(row, self._envelope)
            found = _Connect(h, schema, row)
        except (connect.ConnectSchemaError, debezium.EnvelopeError) as e:
            found = _Connect(h, None, StructType([]), f"{self._src.column} Connect schema: {e}")
        if len(self._parsed) >= 64:
            self._parsed.clear()
        self._parsed[text] = found
        return found
