"""JSON records parsed into rows (see `json` for how the decoder inspects a batch): plain JSON with
the table's schema, Connect JSON with each record's own schema (a CASE on the schema's hash), and
the error that says why a record did not parse.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType, StructField, StructType

from icesink.batch.decode import (
    ERROR,
    ROW,
    ExpressionMemo,
    Source,
    connect_columns,
    debezium,
    error,
    fenced,
    no_error,
    pending,
)
from icesink.batch.decode.avro import align
from icesink.batch.decode.debezium import EnvelopeSpec
from icesink.schema import connect
from icesink.schema.evolution import CORRUPT_COLUMN, conflicts, merged, parse_schema

_PLAIN = "__icesink_plain"
_HASH = "__icesink_schema_hash"
_CONNECT = "__icesink_connect"
_CONVERTED = "__icesink_converted"
PARSE_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}


def json_text(src: Source) -> Column:
    """The record's JSON text, unframed if Confluent's JSONSerializer framed it."""
    data = F.col(src.column)
    framed = (F.length(data) >= 5) & (F.substring(data, 1, 1) == F.unhex(F.lit("00")))
    return F.when(framed, F.expr(f"substring({src.column}, 6)")).otherwise(data).cast("string")


def schema_text(src: Source) -> Column:
    """The record's top-level `schema` value as JSON text (null when it has none)."""
    return F.get_json_object(json_text(src), "$.schema")


def schema_hash(src: Source) -> Column:
    text = schema_text(src)
    return F.when(text.isNotNull(), F.xxhash64(text))


@dataclass(frozen=True)
class SchemaInBatch:
    """One distinct Connect schema of the batch: usable (`schema`, `row`) or not (`problem`)."""

    hash: int
    schema: connect.ConnectSchema | None
    row: StructType  # the row type its records give (for envelopes: the image + operation/source columns)
    problem: str | None = None


class InspectedJson:
    def __init__(
        self,
        records: DataFrame,
        inferred: StructType | None,
        schemas: list[SchemaInBatch],
        envelope: EnvelopeSpec | None,
        src: Source,
        guessed: bool = False,
        memo: ExpressionMemo[tuple[Column, Column, Column]] | None = None,
    ) -> None:
        self._records = records
        self._src = src
        self._memo = ExpressionMemo() if memo is None else memo
        # `inferred` is the table's shape, not the batch's: a record it does not fit is pending.
        self._guessed = guessed
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
            # The same for every batch with the same table schema and inferred types: built once.
            inferred = self._inferred.json() if self._inferred is not None else None
            key = (target.json(), inferred, self._envelope, self._src, self._guessed)
            plain, row, reason = self._memo.get(key, lambda: self._plain_columns(target))
            parsed = self._records.withColumn(_PLAIN, plain)
            return parsed.select(*columns, row, reason)
        h = F.col(_HASH)
        decoded, converted = [], []
        for i, s in enumerate(self._schemas):
            if s.schema is None:
                continue
            parse_type = StructType(
                [StructField("payload", s.schema.parse_type, True), StructField(CORRUPT_COLUMN, StringType(), True)]
            )
            value = F.from_json(json_text(self._src), parse_type, PARSE_OPTIONS)
            decoded.append(F.when(h == F.lit(s.hash), value).alias(f"{_CONNECT}{i}"))
            # A column of its own: the row and the checks below refer to it many times, and an
            # expression repeated in each reference would grow the plan past the driver's memory.
            converted.append(
                connect_columns.convert(F.col(f"{_CONNECT}{i}.payload"), s.schema.root).alias(f"{_CONVERTED}{i}")
            )
        connect_hashes = [F.lit(s.hash) for s in self._schemas]
        is_connect = F.coalesce(h.isin(*connect_hashes), F.lit(False))
        tombstone = F.col(self._src.column).isNull()
        out: Column = F.lit(None).cast(target)
        reason = F.when(tombstone, _null_value(self._src))
        step = self._records.withColumn(_HASH, schema_hash(self._src))
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

    def _plain_columns(self, target: StructType) -> tuple[Column, Column, Column]:
        """`_plain`, with the row and the error as the ROW and ERROR columns."""
        plain, row, reason = self._plain(target)
        # Fenced (see `Inspected.parse`): unfenced, a filter on it put from_json in the plan 9 times.
        return plain, row.alias(ROW), fenced(reason).alias(ERROR)

    def _plain(self, target: StructType) -> tuple[Column, Column, Column]:
        """The parsed helper column, the row and the error of records without a Connect schema."""
        assert self._inferred is not None or not self._schemas
        inferred = self._inferred if self._inferred is not None else StructType([])
        if self._envelope is None:
            plain = F.from_json(json_text(self._src), parse_schema(target), PARSE_OPTIONS)
            row = F.col(_PLAIN)
            if self._schemas:
                # Typed as the Connect branches' rows: without the corrupt-record column.
                fields = [row[f.name].alias(f.name) for f in target.fields]
                row = F.when(row.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*fields))
            reason = _reason(self._src, _PLAIN, no_error())
            if self._guessed:
                corrupt = F.col(f"{_PLAIN}.{CORRUPT_COLUMN}")
                reason = F.when(unfit(self._src, target, corrupt), pending()).otherwise(reason)
            return plain, row, reason
        # before/after are parsed straight as the target's row columns: no cast needed after.
        env_type = debezium.envelope_parse_type(inferred, target, self._envelope)
        plain = F.from_json(json_text(self._src), parse_schema(env_type), PARSE_OPTIONS)
        row = debezium.row(F.col(_PLAIN), env_type, target, self._envelope, _as_is)
        reason = _reason(self._src, _PLAIN, debezium.envelope_error(F.col(_PLAIN), env_type))
        return plain, row, reason

    def _connect_row(
        self, parsed: Column, value: Column, s: SchemaInBatch, schema: connect.ConnectSchema, target: StructType
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
        lost = connect_columns.lost(payload, value, schema.root)
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


def unfit(src: Source, shape: StructType, corrupt: Column) -> Column:
    """Whether a record is a JSON object that `shape` does not cover: a top-level key that is not
    one of its columns (the parse would drop it), or a value its column type does not take (the
    parse flags it in `corrupt`, the corrupt-record column of parsing with `shape`). Such a record is
    not bad: inferring the types over it may widen or add columns. Only for shapes of primitive
    columns and arrays of them (a nested field's new key is not seen here)."""
    text = json_text(src)
    names = F.array(*[F.lit(f.name) for f in shape.fields]) if shape.fields else F.array().cast("array<string>")
    new_key = F.coalesce(F.size(F.array_except(F.json_object_keys(text), names)) > 0, F.lit(False))
    object_not_fitting = corrupt.isNotNull() & F.try_parse_json(corrupt).isNotNull() & F.ltrim(corrupt).startswith("{")
    return F.col(src.column).isNotNull() & (new_key | F.coalesce(object_not_fitting, F.lit(False)))


def corrupt_under(src: Source, shape: StructType) -> Column:
    """The corrupt-record column of parsing the record with `shape` (null when it fits)."""
    return F.from_json(json_text(src), parse_schema(shape), PARSE_OPTIONS)[CORRUPT_COLUMN]


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
