"""Confluent-framed Avro values -> rows, decoded in the JVM by Spark's from_avro.

The driver finds the batch's distinct schema ids (a small aggregate), fetches each writer schema
from the registry once, and decodes each id's records with its own writer schema; no Python runs
per record. Records that cannot be decoded carry an ERROR naming the stage:
`header` (not Confluent-framed), `schema` (id unknown to the registry, or not a record schema),
`decode` (the body does not decode with its writer schema), `convert` (a field's type does not
fit the table's column).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.types import ArrayType, BooleanType, DataType, MapType, StructField, StructType

from icesink import avro_schema
from icesink.decode import ERROR, ROW, error, meta, no_error
from icesink.errors import SchemaNotFoundError
from icesink.registry import SchemaRegistry
from icesink.schema_diff import conflicts, merged
from icesink.wire import VALUE_SCHEMA_ID_HEADER

log = logging.getLogger(__name__)
_AVRO = "__icesink_avro"
_ID = "__icesink_schema_id"


def _zero() -> Column:
    return F.unhex(F.lit("00"))


def _header_id() -> Column:
    return F.expr(f"element_at(filter(headers, h -> h.key = '{VALUE_SCHEMA_ID_HEADER}'), 1).value")


def schema_id() -> Column:
    """The writer schema id: from the `__value_schema_id` header if present, else the 5-byte frame."""
    hid = _header_id()
    in_header = hid.isNotNull() & (F.length(hid) == 5) & (F.substring(hid, 1, 1) == _zero())
    framed = (F.length("value") >= 5) & (F.substring("value", 1, 1) == _zero())
    return F.when(in_header, _id_of(hid)).when(framed, _id_of(F.col("value")))


def _id_of(framed: Column) -> Column:
    return F.conv(F.hex(F.substring(framed, 2, 4)), 16, 10).cast("long")


def body() -> Column:
    hid = _header_id()
    in_header = hid.isNotNull() & (F.length(hid) == 5) & (F.substring(hid, 1, 1) == _zero())
    return F.when(in_header, F.col("value")).otherwise(F.expr("substring(value, 6)"))


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
    schema_id: int
    writer: str
    reader: str
    struct: StructType


class PreparedAvro:
    def __init__(self, records: DataFrame, writers: list[_Writer], unusable: dict[int, tuple[str, str, str]]) -> None:
        self._records = records
        self._writers = writers
        self._unusable = unusable
        self.schema = StructType([])
        for w in writers:
            self.schema = merged(self.schema, w.struct)

    def parse(self, target: StructType) -> DataFrame:
        records = self._records.withColumn(_ID, schema_id())
        frames = []
        for w in self._writers:
            decoded = from_avro(body(), w.writer, {"mode": "PERMISSIVE", "avroSchema": w.reader})
            sub = records.where(F.col(_ID) == w.schema_id).withColumn(_AVRO, decoded)
            problems = conflicts(target, w.struct)
            if problems:
                reason = error("convert", "IncompatibleType", f"writer schema {w.schema_id}: " + "; ".join(problems))
                row = F.lit(None).cast(target)
            else:
                decode_failed = error(
                    "decode", "AvroDecodeError", f"body does not decode with writer schema {w.schema_id}"
                )
                reason = F.when(F.col(f"{_AVRO}.{avro_schema.SENTINEL}").isNull(), decode_failed).otherwise(no_error())
                # The decoded struct also has the sentinel: always project it onto the target.
                decoded_type = StructType([*w.struct.fields, StructField(avro_schema.SENTINEL, BooleanType())])
                row = align(F.col(_AVRO), decoded_type, target)
            frames.append(sub.select(*meta(), row.alias(ROW), reason.alias(ERROR)))
        known = [w.schema_id for w in self._writers]
        rest = records.where(F.col(_ID).isNull() | ~F.col(_ID).isin(known))
        reason = F.when(
            F.col("value").isNull(),
            error("decode", "NullValue", "null value (tombstone) for an append-only table"),
        )
        reason = reason.when(
            F.col(_ID).isNull(), error("header", "NotConfluentFramed", "no 0x00 magic byte and schema id")
        )
        for sid, (stage, cls, msg) in self._unusable.items():
            reason = reason.when(F.col(_ID) == sid, error(stage, cls, msg))
        frames.append(rest.select(*meta(), F.lit(None).cast(target).alias(ROW), reason.alias(ERROR)))
        out = frames[0]
        for f in frames[1:]:
            out = out.unionByName(f)
        return out


class AvroDecoder:
    def __init__(self, registry: SchemaRegistry) -> None:
        self._registry = registry

    def prepare(self, records: DataFrame) -> PreparedAvro:
        ids = sorted(r[0] for r in records.select(schema_id()).distinct().collect() if r[0] is not None)
        writers: list[_Writer] = []
        unusable: dict[int, tuple[str, str, str]] = {}
        for sid in ids:
            try:
                found = self._registry.schema(sid)  # RegistryUnavailableError propagates: the batch fails
            except SchemaNotFoundError as e:
                unusable[sid] = ("schema", "SchemaNotFound", str(e))
                continue
            if found.schema_type.upper() != "AVRO":
                unusable[sid] = (
                    "schema",
                    "UnsupportedSchemaType",
                    f"schema {sid} is {found.schema_type}, not AVRO",
                )
                continue
            try:
                reader = avro_schema.reader_with_sentinel(found.schema)
            except avro_schema.AvroSchemaError as e:
                unusable[sid] = ("schema", "UnsupportedSchema", f"schema {sid}: {e}")
                continue
            probe = records.select(from_avro(body(), found.schema, {"mode": "PERMISSIVE"}).alias(_AVRO))
            struct = probe.schema[_AVRO].dataType
            assert isinstance(struct, StructType)
            writers.append(_Writer(sid, found.schema, reader, struct))
        log.debug("avro writer schemas in batch: %s; unusable: %s", [w.schema_id for w in writers], sorted(unusable))
        return PreparedAvro(records, writers, unusable)
