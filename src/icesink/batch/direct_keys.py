"""The record key's column of a table the one-pass job writes (batch/direct_tables.py), as Spark's
path fills it (batch/decode/records.py `_nested`, batch/decode/keys.py): `decode.key_column`
after the values' columns, holding the key as a string (`decode.key_format: string`) or as the
struct of an Avro record key (`avro`, the registry's writer schemas of the key records, semantic
types converted) or of a Connect JSON record key (`json`, with Connect JSON values: the key's
struct type is found with them, batch/direct_tables.py), or of a plain JSON record key (`json`,
with plain JSON values: the key column's own struct, or a new table's the struct Spark infers from
a sample of the keys). A table of changes then also takes tombstones, as deletes of their key.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import DataType, StringType, StructField, StructType

from icesink.batch.context import BatchContext
from icesink.batch.decode.avro import AvroDecoder
from icesink.batch.decode.json import JsonDecoder
from icesink.batch.direct_avro import direct_avro, merged_rows
from icesink.batch.work import Planned
from icesink.config import KeyFormat
from icesink.tasks.decode_avro import DirectAvro
from icesink.tasks.decode_connect import DirectConnect
from icesink.tasks.decode_json import DirectColumn, direct_column


@dataclass(frozen=True)
class KeySide:
    """The record keys of a batch's table, before its columns are known."""

    column: str
    new_type: DataType  # the key column's type in a new table
    writers: dict[bytes, str] | None = None  # Avro record keys: frame key -> writer schema
    connect: bool = False  # Connect JSON record keys (tasks/decode_connect.py)
    plain: bool = False  # plain JSON record keys (tasks/plain_rows.py)


@dataclass(frozen=True)
class RecordKey:
    """The key column of a table the one-pass job writes (its tasks get the column and the decoder:
    tasks/table_out.DirectTable)."""

    column: str
    # Avro, Connect JSON or plain JSON record keys: what the tasks decode them with
    decoder: DirectAvro | DirectConnect | DirectColumn | None = None


def key_side(ctx: BatchContext, planned: Planned) -> tuple[bool, KeySide | None]:
    """(whether the tasks can fill the table's key column, what they fill it from: None for no key
    column). Keys the tasks do not decode (JSON; an Avro key not a record the one-pass decoder
    takes; a batch whose key schemas are not planned) leave the table to Spark's path."""
    decode = ctx.config.decode
    if decode.key_format is KeyFormat.NONE:
        return ctx.key_decoder is None, None
    if decode.key_format is KeyFormat.STRING:
        return ctx.key_decoder is None, KeySide(decode.key_column, StringType())
    decoder = ctx.key_decoder
    if decode.key_format is KeyFormat.JSON and isinstance(decoder, JsonDecoder):
        return True, KeySide(decode.key_column, StructType([]), connect=True)
    if decode.key_format is not KeyFormat.AVRO or not isinstance(decoder, AvroDecoder) or planned.keys is None:
        return False, None
    writers = decoder.writer_schemas(planned.keys)
    struct = merged_rows(writers) if writers else None
    if writers is None or struct is None:
        return False, None
    return True, KeySide(decode.key_column, struct, writers)


def with_key_column(values: StructType | None, key: KeySide | None) -> StructType | None:
    """A new table's columns: the values' and the key column after them (as Spark's path adds it);
    None when a value field has the key column's name."""
    if values is None or key is None:
        return values
    if key.column in values.fieldNames():
        return None
    return StructType([*values.fields, StructField(key.column, key.new_type)])


def record_key(schema: StructType, key: KeySide | None) -> tuple[bool, RecordKey | None]:
    """(whether the table's key column holds the keys, what its tasks fill it with): a string
    column for string keys; for Avro keys a struct column every key writer schema fits."""
    if key is None:
        return True, None
    if key.column not in schema.fieldNames():
        return False, None
    column = schema[key.column].dataType
    if key.plain:
        plain = direct_column(key.column, column) if isinstance(column, StructType) and column.fields else None
        return plain is not None, RecordKey(key.column, plain) if plain is not None else None
    if key.connect:
        fits = isinstance(column, StructType) and bool(column.fields)
        return fits, RecordKey(key.column, DirectConnect(column)) if isinstance(column, StructType) else None
    if key.writers is None:
        return column == StringType(), RecordKey(key.column)
    if not isinstance(column, StructType):
        return False, None
    decoder = direct_avro(key.writers, column)
    return decoder is not None, RecordKey(key.column, decoder)
