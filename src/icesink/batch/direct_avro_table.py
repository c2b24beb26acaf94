"""An Avro table's part of the one-pass job (batch/direct_tables.py): the writer schemas its tasks
decode (batch/direct_avro.py), a new table's columns from them, and a table evolved for writer
schemas its columns do not take yet, as Spark's path's prepare step would evolve it."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pyspark.sql.types import StructType

from icesink.batch.context import BatchContext
from icesink.batch.decode.avro import AvroDecoder
from icesink.batch.decode.debezium import EnvelopeSpec
from icesink.batch.direct_avro import avro_declined, direct_avro, merged_rows, row_struct
from icesink.batch.direct_item import DirectItem, declined
from icesink.batch.direct_json import Item
from icesink.batch.direct_keys import KeySide, record_key, with_key_column
from icesink.batch.direct_shape import Shaping
from icesink.batch.plan import TablePlan
from icesink.batch.prepare import evolve_to
from icesink.iceberg.jvm import JavaObject
from icesink.kafka import wire
from icesink.schema.evolution import conflicts, merged

log = logging.getLogger(__name__)


def avro_item(
    ctx: BatchContext, item: Item, key: KeySide | None, shaping: Shaping, evolve: bool = True
) -> DirectItem | None:  # fmt: skip
    """An Avro table; `shaping`: flattened or case-insensitive (batch/direct_shape.py; a flattened
    one has no record key column nor Debezium envelope). Without `evolve`, only a table that takes
    the writer schemas as it is (a table of field-routed topics: the writer schemas are those of
    all of their records, other tables' too)."""
    _, table, planned = item
    decoder = ctx.decoder
    if not isinstance(decoder, AvroDecoder):
        return None
    envelope = decoder.envelope  # the config's (decode/build.py), a Debezium one or none
    plan = item[0]
    if envelope is not None and shaping.separator:
        return declined(ctx, plan, "tables.flatten_separator is set for a table of Debezium change events")
    writers = decoder.writer_schemas(planned.values)
    if writers is None:
        return declined(ctx, plan, "a schema its topics' records name is not an Avro schema the registry has")
    if key is not None and shaping.case_insensitive and _spells_key(writers, envelope, key.column):
        return declined(ctx, plan, f"a field of its records has the name of its key column {key.column}, case aside")
    schema: StructType | None
    if table is not None:
        schema = ctx.catalog.spark_schema(table)
    else:  # created with the writer schemas' rows, as the usual path would (records.decode_table)
        schema = with_key_column(merged_rows(writers, envelope, shaping), key)
    if schema is None:
        return None
    fits, record = record_key(schema, key)
    if not fits:
        return None
    # The writer schemas fill the table's columns but the key column, which the tasks fill with
    # the record key (a required column when it is the table's key).
    values = StructType([f for f in schema.fields if key is None or f.name != key.column])
    found = direct_avro(writers, values, envelope, shaping)
    if (
        found is None
        and evolve
        and table is not None
        and _evolved(ctx, plan, table, schema, writers, envelope, shaping)
    ):
        schema = ctx.catalog.spark_schema(table)
        values = StructType([f for f in schema.fields if key is None or f.name != key.column])
        found = direct_avro(writers, values, envelope, shaping)
    if found is None:
        return declined(ctx, plan, avro_declined(writers, values, envelope, shaping))
    return DirectItem(item, found, schema, key=record)


def _evolved(
    ctx: BatchContext, plan: TablePlan, table: JavaObject, schema: StructType, writers: Mapping[bytes, str],
    envelope: EnvelopeSpec | None, shaping: Shaping,
) -> bool:  # fmt: skip
    """Whether the table was evolved to take the rows of `writers`, as Spark's path's prepare step
    evolves it (batch/prepare.py: new columns, wider types, relaxed requirements, one metadata
    commit before the data commit). Not when their rows are not ones the tasks take, or conflict
    with its columns (Spark's path applies `tables.on_incompatible` to those records)."""
    rows = merged_rows(writers, envelope, shaping, schema)
    if rows is None:
        return False
    target = merged(schema, rows)
    if conflicts(target, rows) or not evolve_to(ctx, plan.table, table, target):
        return False
    ids = ", ".join(str(wire.schema_ref(frame)) for frame in sorted(writers))
    log.info("table %s: evolved for the rows of writer schema(s) %s (one-pass job)", plan.table, ids)
    return True


def _spells_key(writers: Mapping[bytes, str], envelope: EnvelopeSpec | None, column: str) -> bool:
    """Whether a writer schema's rows have a field the key column's name matches ignoring case (the
    two would be one column of a case-insensitive table)."""
    rows = [row_struct(text, envelope) for text in writers.values()]
    return any(f.name.lower() == column.lower() for row in rows if row is not None for f in row.fields)
