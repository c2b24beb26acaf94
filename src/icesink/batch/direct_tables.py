"""Which tables the one-pass job (batch/direct.py) takes in a batch, and with which decoder: a
table whose records its tasks decode exactly as Spark's path would, or none.

Tables routed by topic or by a record field (batch/direct_routing.py: plain JSON or Avro records,
no envelope), partitioned or not (the tasks compute the partition values of the table's
current spec, tasks/partition_values.py), append, upsert or changelog (batch/direct_changes.py: each task
reads whole topic-partitions and writes each key's last change of them, and the driver checks that
no key was written by two tasks, tasks/change_rows.py), with no record key column, or one the
tasks fill (batch/direct_keys.py: a string key, an Avro record key for Avro values, a JSON record
key beside JSON values; a table of changes then takes tombstones as deletes of their key). JSON
(`decode.direct_json`): plain values, or Debezium envelopes without Connect schemas, into a table
whose columns are all longs, doubles, strings, booleans, structs of those at any depth, or arrays
of either, nullable but for the key columns (a table of nested
columns, which Spark's path does not guess, by its own columns); Connect JSON (schemas on), plain
or Debezium envelopes, into a table their schemas' rows fit (tasks/decode_connect.py); for a table
that does not exist yet, the columns of a sample of the batch (batch/direct_json.py). Avro: writer
schemas (those the topics carried last time, or the registry's latest) of records, or of Debezium
envelopes, whose rows fit the table as it is (batch/direct_avro.py, `decode.direct_avro`), or once
the table is evolved to take them (batch/direct_avro_table.py, as Spark's path's prepare step evolves it); for a
table that does not exist yet, the rows of those writer schemas, as Spark's path would create it.
A flattened or case-insensitive table of Avro values without a record key column or an envelope,
or a case-insensitive one with them: the rows in its names and shape (batch/direct_shape.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StructType

from icesink.batch.context import BatchContext
from icesink.batch.decode.debezium import EnvelopeSpec
from icesink.batch.decode.json import JsonDecoder
from icesink.batch.direct_avro_table import avro_item
from icesink.batch.direct_changes import table_changes
from icesink.batch.direct_item import DirectItem, declined
from icesink.batch.direct_json import Item, connect_key, json_schema
from icesink.batch.direct_keys import KeySide, key_side, record_key
from icesink.batch.direct_routing import route_filter
from icesink.batch.direct_shape import Shaping, shaped
from icesink.batch.route import Targets
from icesink.batch.work import partition_fields
from icesink.batch.write import changes_budget
from icesink.config import ValueFormat
from icesink.tasks.decode_avro import DirectAvro
from icesink.tasks.decode_connect import DirectConnect
from icesink.tasks.decode_json import direct_columns
from icesink.tasks.json_shape import ShapedJson
from icesink.tasks.partition_values import supported
from icesink.tasks.plain_rows import PlainEnvelope
from icesink.tasks.table_out import DirectDecoder

log = logging.getLogger(__name__)


def direct_item(
    ctx: BatchContext, targets: Targets, item: Item, inferred: StructType | None = None
) -> DirectItem | None:  # fmt: skip
    """The table's part of the direct job when it can write the table's share of the batch, else
    None. A partitioned table too, when its tasks compute its partition values (the table's
    current spec; a new table's from `tables.partition_by`). `inferred`: a new plain JSON
    table's columns, inferred from all of its records of the batch (batch/direct_rounds.py)."""
    found = _decoder_item(ctx, targets, item, inferred)
    if found is None:
        return None
    plan, table, _ = item
    fields = (
        ctx.catalog.partition_fields(table)
        if table is not None
        else partition_fields(ctx.config.tables.settings_for(plan.table.name))
    )
    if not all(
        f.column in found.schema.fieldNames() and supported(f, to_arrow_type(found.schema[f.column].dataType))
        for f in fields
    ):
        return None
    return found


def _decoder_item(
    ctx: BatchContext, targets: Targets, item: Item, inferred: StructType | None = None
) -> DirectItem | None:  # fmt: skip
    plan, _, planned = item
    config = ctx.config
    routed = plan.table not in targets.topic_routed
    ok, key = key_side(ctx, planned)
    if not ok:
        return declined(ctx, plan, f"its record keys (decode.key_format {config.decode.key_format.value}) are not "
                        "ones the one-pass job fills its key column with")  # fmt: skip
    settings = config.tables.settings_for(plan.table.name)
    shaping = Shaping.of(settings)
    # An Avro table matched ignoring case keeps its record key column as it is; a flattened one
    # would flatten the key's struct too, and JSON's shaping takes no key.
    keyed = key is not None and (bool(shaping.separator) or config.decode.format is not ValueFormat.AVRO)
    if not shaping.plain and (keyed or routed):
        return declined(ctx, plan, "tables.flatten_separator (or, for JSON, tables.case_insensitive) is set for a "
                        "table with a record key column, or either for a table routed by a record field")  # fmt: skip
    found = None
    if config.decode.format is ValueFormat.JSON and config.decode.direct_json and (key is None or not key.writers):
        found = _json_item(ctx, targets, item, key, settings.is_cdc, inferred, shaping)
        if found is None:
            return declined(ctx, plan, "its columns, or its records' shape or keys, are not ones the one-pass JSON "
                            "decoder takes (decode.direct_json in the README)")  # fmt: skip
    avro_keys = key is None or not key.connect  # JSON keys only beside Connect JSON values
    if (
        config.decode.format is ValueFormat.AVRO
        and config.decode.direct_avro
        and planned.values is not None
        and avro_keys
    ):
        found = avro_item(ctx, item, key, shaping, evolve=not routed)
        if found is not None and settings.is_cdc:
            found = _with_changes(ctx, found)
            if found is None:
                return declined(ctx, plan, "its changes are not ones the one-pass job applies (an operation column "
                                "not a string, an order_by column not an integer or a timestamp, or the table's "
                                "order bound not known)")  # fmt: skip
    return _with_route(ctx, targets, found) if routed and found is not None else found


def _with_route(ctx: BatchContext, targets: Targets, found: DirectItem) -> DirectItem | None:
    """A table of field-routed topics with the records its tasks take of them
    (batch/direct_routing.py): plain JSON values or Avro records, without an envelope."""
    plan = found.item[0]
    decoder = found.decoder
    if not isinstance(decoder, tuple) and not (isinstance(decoder, DirectAvro) and decoder.envelope is None):
        return declined(ctx, plan, "it is routed by a record field, and its records are change events or Connect JSON")
    route = route_filter(targets, plan.table, found.schema, found.key.column if found.key is not None else None)
    if isinstance(route, str):
        return declined(ctx, plan, f"it is routed by a record field, and {route}")
    return replace(found, route=route)


def _json_item(
    ctx: BatchContext, targets: Targets, item: Item, key: KeySide | None, cdc: bool, inferred: StructType | None,
    shaping: Shaping,
) -> DirectItem | None:  # fmt: skip
    """A JSON table, of plain JSON (decoded by the tasks' `direct_columns`) or of Connect JSON
    (tasks/decode_connect.py), with the columns batch/direct_json.py says; a flattened or
    case-insensitive one of plain JSON without an envelope (`shaping`, tasks/json_shape.py)."""
    decoder = ctx.decoder
    if not isinstance(decoder, JsonDecoder) or (not shaping.plain and decoder.envelope is not None):
        return None
    if key is not None and key.connect:
        if item[1] is None and item[0].table not in targets.topic_routed:
            return None  # a new table's keys are sampled from all of its topics' records: other tables' too
        key = connect_key(ctx, targets, item, key)
        if key is None:
            return None
    schema, connect = json_schema(ctx, targets, item, key, decoder, inferred)
    schema = _shaped_json(schema, connect, item[1] is None, shaping)
    if schema is None:
        return None
    # Connect JSON keys beside Connect JSON values only, plain JSON keys beside plain values only.
    if key is not None and (key.connect or key.plain) and (key.connect, key.plain) != (connect, not connect):
        return None
    plan, table, _ = item
    fits, record = record_key(schema, key)
    if not fits:
        return None
    changes = table_changes(ctx, plan, table, schema, record) if cdc else None
    if cdc and changes is None:
        return None
    spec, floor = changes if changes is not None else (None, None)
    keys = spec.keys if spec is not None else ()
    found = _json_decoder(schema, connect, keys, decoder.envelope, shaping)
    return DirectItem(item, found, schema, changes=spec, key=record, order_floor=floor) if found is not None else None


def _shaped_json(schema: StructType | None, connect: bool, new: bool, shaping: Shaping) -> StructType | None:
    """A flattened or case-insensitive table's columns: a new one's shaped as Spark's path shapes
    the records' (batch/direct_shape.py); not for Connect JSON."""
    if schema is None or shaping.plain:
        return schema
    if connect:
        return None
    if not new:
        return schema
    reshaped = shaped(schema, shaping, StructType([]))
    return reshaped[0] if reshaped is not None else None


def _json_decoder(
    schema: StructType, connect: bool, keys: Sequence[str], envelope: EnvelopeSpec | None, shaping: Shaping
) -> DirectDecoder | None:  # fmt: skip
    if connect:
        # A table of another writer's may have a required column: a null the tasks leave there fails the write.
        required = any(not f.nullable and f.name not in keys for f in schema.fields)
        return DirectConnect(schema, envelope) if not required else None
    columns = direct_columns(schema, keys)
    if not columns:
        return None
    if not shaping.plain:
        return ShapedJson(columns, shaping.separator, shaping.case_insensitive)
    return PlainEnvelope(columns, envelope) if envelope is not None else columns


def _with_changes(ctx: BatchContext, found: DirectItem) -> DirectItem | None:
    """An Avro upsert or changelog table, when the one-pass job can write its changes (batch/direct_changes.py).
    How many changes the job takes: `split_direct`."""
    plan, table, _ = found.item
    changes = table_changes(ctx, plan, table, found.schema, found.key)
    return replace(found, changes=changes[0], order_floor=changes[1]) if changes is not None else None


def split_direct(ctx: BatchContext, targets: Targets, todo: list[Item]) -> tuple[list[DirectItem], list[Item]]:
    """(the tables the direct job writes, the others)."""
    found = ctx.tables.map(todo, lambda item: direct_item(ctx, targets, item))  # a new JSON table's sample: a job
    # A task holds every change it reads until it has them all: the tables of changes the job
    # takes hold no more than Spark's path would give its tasks (the others take that path).
    budget = changes_budget(ctx.spark.sparkContext.defaultParallelism)
    for i, d in enumerate(found):
        if d is not None and d.changes is not None:
            budget -= d.item[0].records
            if budget < 0:
                found[i] = None
    direct = [d for d in found if d is not None]
    others = [item for item, d in zip(todo, found, strict=True) if d is None]
    return direct, others
