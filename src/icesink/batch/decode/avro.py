"""Confluent-framed Avro values -> rows, decoded in the JVM by Spark's from_avro.

The driver takes the schema ids the batch's topics carried last time (or, for a topic not seen yet,
finds the batch's distinct ids: a small scan), fetches each writer schema from the registry once,
and decodes each id's records with its own writer schema; no Python runs per record. Records that
cannot be decoded carry an ERROR naming the stage: `header` (not Confluent-framed), `schema` (id
unknown to the registry, or not a record schema), `decode` (the body does not decode with its
writer schema), `convert` (a field's type does not fit the table's column). A record whose id the
guess did not include is left pending (see seen_schemas.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.types import ArrayType, BooleanType, DataType, MapType, StructField, StructType

from icesink.batch.decode import (
    ERROR,
    KEY,
    ROW,
    VALUE,
    ExpressionMemo,
    Source,
    debezium,
    error,
    fenced,
    no_error,
    pending,
    semantic,
)
from icesink.batch.decode.debezium import EnvelopeSpec
from icesink.errors import SchemaNotFoundError
from icesink.kafka import wire
from icesink.kafka.registry import SchemaRegistry
from icesink.schema import avro as avro_schema
from icesink.schema.connect import ZONED_TIMESTAMP
from icesink.schema.evolution import conflicts, merged

log = logging.getLogger(__name__)
_AVRO = "__icesink_avro"
_KEY = "__icesink_frame_key"


def _zero() -> Column:
    return F.unhex(F.lit("00"))


def _in_header(src: Source) -> Column:
    # The first header of that name, found by position rather than with a `filter` lambda: a
    # lambda has no generated code, and one such expression makes Spark interpret the whole
    # decode stage (from_avro included) instead of running it compiled.
    at = F.array_position(F.col("headers.key"), F.lit(src.schema_id_header))
    hid = F.when(at > 0, F.element_at(F.col("headers.value"), at.cast("int")))
    as_id = (F.length(hid) == wire.HEADER_SIZE) & (F.substring(hid, 1, 1) == _zero())
    as_guid = (F.length(hid) == wire.GUID_HEADER_SIZE) & (F.substring(hid, 1, 1) == F.unhex(F.lit("01")))
    return F.when(hid.isNotNull() & (as_id | as_guid), hid)


def frame_key(src: Source = VALUE) -> Column:
    """The bytes naming the writer schema: the schema-id header if present (0x00 + 4-byte id, or
    0x01 + 16-byte GUID), else the payload's first 5 bytes; null when the record carries neither."""
    data = F.col(src.column)
    framed = (F.length(data) >= 5) & (F.substring(data, 1, 1) == _zero())
    return F.coalesce(_in_header(src), F.when(framed, F.substring(data, 1, 5)))


def body(src: Source = VALUE) -> Column:
    return F.when(_in_header(src).isNotNull(), F.col(src.column)).otherwise(F.expr(f"substring({src.column}, 6)"))


def align(col: Column, source: DataType, target: DataType) -> Column:
    """`col` of type `source` reshaped as `target`: fields by name, missing ones null, safe widening."""
    if source == target:
        return col
    if isinstance(source, StructType) and isinstance(target, StructType):
        have = {f.name: f.dataType for f in source.fields}
        fields = [
            (align(col[f.name], have[f.name], f.dataType) if f.name in have else F.lit(None).cast(f.dataType)).alias(
                f.name
            )
            for f in target.fields
        ]
        return F.when(col.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*fields))
    if isinstance(source, ArrayType) and isinstance(target, ArrayType):
        return F.transform(col, lambda x: align(x, source.elementType, target.elementType))
    if isinstance(source, MapType) and isinstance(target, MapType):
        return F.transform_values(col, lambda _, v: align(v, source.valueType, target.valueType)).cast(target)
    return col.cast(target)


@dataclass(frozen=True)
class _Writer:
    key: bytes  # the frame key that names this writer schema
    schema_id: int | str
    writer: str
    reader: str
    struct: StructType  # the row type (for envelopes: after/before + operation and source columns)
    decoded: StructType  # what from_avro yields with the writer schema, semantic types converted
    semantics: dict[semantic.Path, str]  # Debezium semantic-type fields of the writer schema
    raw: StructType  # what from_avro yields, as is


class InspectedAvro:
    def __init__(
        self,
        records: DataFrame,
        writers: list[_Writer],
        unusable: dict[bytes, tuple[str, str, str]],
        envelope: EnvelopeSpec | None,
        src: Source,
        memo: ExpressionMemo[tuple[Column, list[Column], Column, Column]] | None = None,
        guessed: bool = False,
    ) -> None:
        self._records = records
        self._guessed = guessed
        self._envelope = envelope
        self._src = src
        self._writers = writers
        self._unusable = unusable
        self._memo = ExpressionMemo() if memo is None else memo
        self.schema = StructType([])
        for w in writers:
            self.schema = merged(self.schema, w.struct)

    def parse(self, target: StructType) -> DataFrame:
        """One pass: each record is decoded by the from_avro of its own writer schema (a CASE on
        the frame key evaluates only the matching branch); no union, no rescan per schema."""
        frame, decoded, row, reason = self._expressions(target)
        # `*` rather than the records' columns by name: a few py4j calls per named column, per batch.
        step = self._records.withColumn(_KEY, frame).select(F.col("*"), *decoded)
        helpers = [_KEY, *(f"{_AVRO}{i}" for i in range(len(decoded)))]
        # Fenced (see `Inspected.parse`): unfenced, a filter on it put from_avro in the plan 3 times.
        return step.select(F.col("*"), row.alias(ROW), fenced(reason).alias(ERROR)).drop(*helpers)

    def _expressions(self, target: StructType) -> tuple[Column, list[Column], Column, Column]:
        """The frame key, the decoded columns, the row and the error: the same for every batch with
        the same writer schemas and target, so they are built once (hundreds of JVM calls)."""
        memo_key = (
            target.json(),
            tuple((w.key, w.writer, w.reader) for w in self._writers),
            tuple(sorted(self._unusable.items())),
            self._guessed,
        )
        return self._memo.get(memo_key, lambda: self._build(target))

    def _build(self, target: StructType) -> tuple[Column, list[Column], Column, Column]:
        key = F.col(_KEY)
        decoded = []
        for i, w in enumerate(self._writers):
            avro = from_avro(body(self._src), w.writer, {"mode": "PERMISSIVE", "avroSchema": w.reader})
            decoded.append(F.when(key == F.lit(w.key), avro).alias(f"{_AVRO}{i}"))
        reason = F.when(
            F.col(self._src.column).isNull(),
            error("decode", "NullValue", f"null {self._src.column} (tombstone) for an append-only table"),
        )
        reason = reason.when(key.isNull(), error("header", "NotConfluentFramed", "no 0x00 magic byte and schema id"))
        row = F.lit(None).cast(target)
        for i, w in enumerate(self._writers):
            is_w = key == F.lit(w.key)
            w_row, w_reason = self._decoded(F.col(f"{_AVRO}{i}"), w, target)
            reason = reason.when(is_w, w_reason)
            row = F.when(is_w, w_row).otherwise(row)
        for frame_key_bytes, (stage, cls, msg) in self._unusable.items():
            reason = reason.when(key == F.lit(frame_key_bytes), error(stage, cls, msg))
        # A schema id the guess did not include: decoded by a second pass. Without a guess every id
        # of the batch was looked up first, so another one cannot occur.
        unknown = pending() if self._guessed else error("schema", "UnexpectedSchemaId", "schema id not seen first")
        reason = reason.otherwise(unknown)
        return frame_key(self._src), decoded, row, reason

    def _decoded(self, col: Column, w: _Writer, target: StructType) -> tuple[Column, Column]:
        """The row and the error of records decoded with writer `w`."""
        problems = conflicts(target, w.struct)
        if problems:
            return F.lit(None).cast(target), error(
                "convert", "IncompatibleType", f"writer schema {w.schema_id}: " + "; ".join(problems)
            )
        failed = error("decode", "AvroDecodeError", f"body does not decode with writer schema {w.schema_id}")
        reason = F.when(col[avro_schema.SENTINEL].isNull(), failed)
        # The decoded struct also carries the sentinel; converting or aligning projects it away.
        with_sentinel = StructType([*w.raw.fields, StructField(avro_schema.SENTINEL, BooleanType())])
        value, value_type = col, with_sentinel
        if w.semantics:
            value, value_type = semantic.convert(col, w.raw, w.semantics), w.decoded
            overflow = semantic.conversion_failed(col, value, w.semantics)
            if overflow is not None:
                too_big = error("convert", "DecimalOverflow", "a VariableScaleDecimal does not fit decimal(38, 18)")
                reason = reason.when(overflow, too_big)
            unparsed = semantic.conversion_failed(col, value, w.semantics, frozenset({ZONED_TIMESTAMP}))
            if unparsed is not None:
                bad_time = error("convert", "ConversionFailed", "a ZonedTimestamp that does not parse")
                reason = reason.when(unparsed, bad_time)
        if self._envelope is not None:
            return debezium.row(value, value_type, target, self._envelope, align), reason.otherwise(
                debezium.envelope_error(value, value_type)
            )
        return align(value, value_type, target), reason.otherwise(no_error())


class AvroDecoder:
    scans = False

    def __init__(self, registry: SchemaRegistry, envelope: EnvelopeSpec | None = None, src: Source = VALUE) -> None:
        self._registry = registry
        self._envelope = envelope
        self._src = src
        # What from_avro yields for a writer schema, and the parse expressions (see InspectedAvro):
        # both depend on schemas only, so batches with the schemas of an earlier one reuse them.
        self._raw_types: dict[str, StructType] = {}
        self._memo: ExpressionMemo[tuple[Column, list[Column], Column, Column]] = ExpressionMemo()
        self._frame: Column | None = None

    @property
    def envelope(self) -> EnvelopeSpec | None:
        """The Debezium envelope the values are read as, if any."""
        return self._envelope

    def plan_column(self) -> Column:
        # Built once: a Column is an unresolved expression, reusable across batches, and building
        # this one costs a dozen py4j calls and a SQL parse.
        if self._frame is None:
            self._frame = frame_key(self._src)
        return self._frame

    def guess(self, seen: list[Any] | None, shape: DataType | None, topics: Sequence[str]) -> list[Any] | None:
        """The frame keys to decode with in one pass: those the topics carried last time, or for
        topics not seen yet (a new job, a new daily topic) the latest schema of each topic's subject
        (`{topic}-value`, `-key`: the default subject naming); None when some topic has no such
        subject (the records are then looked at first)."""
        if seen is not None:
            return seen
        suffix = "key" if self._src is KEY else "value"
        keys = []
        for topic in topics:
            latest = self._registry.latest_id(f"{topic}-{suffix}")
            if latest is None:
                return None
            keys.append(wire.id_key(latest))
        return sorted(set(keys)) if keys else None

    def writer_schemas(self, planned: Sequence[Any]) -> dict[bytes, str] | None:
        """The writer schema text of each frame key of `planned` (registry lookups, cached), or
        None when one is not an Avro schema the registry knows (Spark's path says why: a dead
        letter)."""
        out = {}
        for k in planned:
            text, _ = self._avro_schema(bytes(k))
            if text is None:
                return None
            out[bytes(k)] = text
        return out

    def _avro_schema(self, key: bytes) -> tuple[str | None, tuple[str, str, str] | None]:
        """(the Avro writer schema a frame key names, None) or (None, why it is unusable: stage,
        error class, message). RegistryUnavailableError propagates: the batch fails."""
        sid = wire.schema_ref(key)
        try:
            found = self._registry.schema(sid)
        except SchemaNotFoundError as e:
            return None, ("schema", "SchemaNotFound", str(e))
        if found.schema_type.upper() != "AVRO":
            return None, ("schema", "UnsupportedSchemaType", f"schema {sid} is {found.schema_type}, not AVRO")
        return found.schema, None

    def pending(self, planned: Any) -> Column:
        """The records a guessed inspect with `planned` (frame keys) leaves pending: another key."""
        ref = self.plan_column()
        return ref.isNotNull() & ~ref.isin(*[F.lit(k) for k in planned]) if planned else ref.isNotNull()

    def inspect(self, records: DataFrame, planned: list[Any] | None = None, guessed: bool = False) -> InspectedAvro:
        if planned is None:
            guessed = False
            planned = [r[0] for r in records.select(frame_key(self._src)).distinct().collect()]
        keys = sorted({bytes(k) for k in planned if k is not None})
        writers: list[_Writer] = []
        unusable: dict[bytes, tuple[str, str, str]] = {}
        for k in keys:
            sid = wire.schema_ref(k)
            text, problem = self._avro_schema(k)
            if text is None:
                assert problem is not None
                unusable[k] = problem
                continue
            try:
                reader = avro_schema.reader_with_sentinel(text)
            except avro_schema.AvroSchemaError as e:
                unusable[k] = ("schema", "UnsupportedSchema", f"schema {sid}: {e}")
                continue
            raw = self._raw_types.get(text)
            if raw is None:
                probe = records.select(from_avro(body(self._src), text, {"mode": "PERMISSIVE"}).alias(_AVRO))
                probed = probe.schema[_AVRO].dataType
                assert isinstance(probed, StructType)
                raw = self._raw_types[text] = probed
            semantics = semantic.semantic_paths(text)
            decoded = semantic.converted_type(raw, semantics)
            assert isinstance(decoded, StructType)
            struct = decoded
            if self._envelope is not None:
                try:
                    struct = debezium.row_type(decoded, self._envelope)
                except debezium.EnvelopeError as e:
                    unusable[k] = ("schema", "NotAnEnvelope", f"schema {sid}: {e}")
                    continue
            writers.append(_Writer(k, sid, text, reader, struct, decoded, semantics, raw))
        log.debug("avro writer schemas in batch: %s; unusable: %s", [w.schema_id for w in writers], sorted(unusable))
        return InspectedAvro(records, writers, unusable, self._envelope, self._src, self._memo, guessed)
