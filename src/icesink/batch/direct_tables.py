"""Which tables the one-pass job (batch/direct.py) takes in a batch, and with which decoder: a
table whose records its tasks decode exactly as Spark's path would, or none.

Values of no envelope, no Connect schemas and no key decoded as Avro or JSON (a string key,
`decode.key_format: string`, the tasks put into the key column, and a table of changes then takes
tombstones as deletes of their key: `_record_key`), routed by topic into a table partitioned or
not (its tasks compute the partition values of its current spec, tasks/partition_values.py): an
append, upsert or changelog table (`_change_spec`: each task reads whole topic-partitions and
writes each key's last change of them, and the driver checks that no key was written by two tasks,
tasks/change_rows.py). JSON: a table whose columns are all longs, doubles, strings, booleans,
structs of those at any depth, or arrays of either, nullable but for the key columns
(`decode.direct_json`; a table of nested columns, which Spark's path does not guess, by its own
columns); for a table that does not exist yet, the columns Spark infers from a sample of the batch
(`_new_json_schema`). Avro: writer schemas (those the topics carried last time, or the registry's
latest) whose fields are all columns of the table with the same type (`decode.direct_avro`); for a
table that does not exist yet, the columns of those writer schemas, as Spark's path would create it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StringType, StructField, StructType

from icesink.batch.changes import ChangeSpec
from icesink.batch.context import BatchContext
from icesink.batch.decode.avro import AvroDecoder
from icesink.batch.decode.json import JsonDecoder
from icesink.batch.decode.records import change_spec
from icesink.batch.plan import TablePlan
from icesink.batch.route import Targets
from icesink.batch.sources import own_ranges, read_ranges
from icesink.batch.work import Planned, partition_fields
from icesink.batch.write import CHANGES_PER_TASK
from icesink.config import Envelope, IncompatiblePolicy, KeyFormat, OrderScope, ValueFormat, WriteMode
from icesink.errors import ConfigError
from icesink.iceberg.jvm import JavaObject
from icesink.model import PartitionRange
from icesink.schema.evolution import conflicts, merged
from icesink.tasks.decode_avro import direct_avro, writer_struct
from icesink.tasks.decode_json import direct_columns
from icesink.tasks.partition_values import supported
from icesink.tasks.table_out import DirectDecoder

log = logging.getLogger(__name__)

Item = tuple[TablePlan, JavaObject | None, Planned]

# Records of each topic-partition a new JSON table's columns are inferred from (`_new_json_schema`).
SAMPLE_RECORDS = 1000


@dataclass(frozen=True)
class DirectItem:
    """A table the direct job writes: its item, its decoder, and its schema (for a table that does
    not exist yet, the one it is created with)."""

    item: Item
    decoder: DirectDecoder
    schema: StructType
    staged: bool = False  # a table that does not exist yet: `item`'s table is the staged one (direct_staging.stage)
    changes: ChangeSpec | None = None  # an upsert or changelog table
    key_column: str | None = None  # the column of the record key as a string (decode.key_format: string)


def direct_item(ctx: BatchContext, targets: Targets, item: Item) -> DirectItem | None:
    """The table's part of the direct job when it can write the table's share of the batch, else
    None. A partitioned table too, when its tasks compute its partition values (the table's
    current spec; a new table's from `tables.partition_by`)."""
    found = _decoder_item(ctx, targets, item)
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


def _decoder_item(ctx: BatchContext, targets: Targets, item: Item) -> DirectItem | None:
    plan, _, planned = item
    config = ctx.config
    # Keys decoded by a decoder (Avro, JSON) take Spark's path; string keys are the tasks' (`_record_key`).
    if ctx.key_decoder is not None or config.decode.key_format not in (KeyFormat.NONE, KeyFormat.STRING):
        return None
    if planned.keys is not None or plan.table not in targets.topic_routed:
        return None
    settings = config.tables.settings_for(plan.table.name)
    if settings.flatten_separator or settings.case_insensitive:
        return None
    found = None
    if config.decode.format is ValueFormat.JSON and config.decode.direct_json:
        found = _json_item(ctx, targets, item, settings.is_cdc)
    if config.decode.format is ValueFormat.AVRO and config.decode.direct_avro and planned.values is not None:
        found = _avro_item(ctx, item)
        found = _with_changes(ctx, found) if found is not None and settings.is_cdc else found
    return found


def _record_key(ctx: BatchContext) -> str | None:
    """The column the record key goes to as a string (`decode.key_format: string`), else None."""
    return ctx.config.decode.key_column if ctx.config.decode.key_format is KeyFormat.STRING else None


def _with_key_column(ctx: BatchContext, values: StructType | None) -> StructType | None:
    """A new table's columns: the values' and, with string keys, the key column after them (as
    Spark's path adds it, records._nested); None when a value field has the key column's name."""
    key_column = _record_key(ctx)
    if values is None or key_column is None:
        return values
    if key_column in values.fieldNames():
        return None
    return StructType([*values.fields, StructField(key_column, StringType())])


def _keyed_table_fits(ctx: BatchContext, schema: StructType) -> bool:
    """Whether an existing table's columns hold the string keys: its key column is a string."""
    key_column = _record_key(ctx)
    return key_column is None or (key_column in schema.fieldNames() and schema[key_column].dataType == StringType())


def _json_item(ctx: BatchContext, targets: Targets, item: Item, cdc: bool) -> DirectItem | None:
    """A plain JSON table: an existing one with its own shape (the guess, made only for plain JSON,
    no envelope, no Connect schemas met, and tables that spell and nest columns as the records do:
    records.guess), a new one with the columns of a sample (`_new_json_schema`)."""
    plan, table, planned = item
    if table is None:
        schema = _with_key_column(ctx, _new_json_schema(ctx, targets, item))
    else:  # the guess is the table's columns but the key column: the table's own, in its order
        schema = ctx.catalog.spark_schema(table) if planned.values is not None and _record_key(ctx) else planned.values
    decoder, settings = ctx.decoder, ctx.config.tables.settings_for(plan.table.name)
    # A table of nested columns, which Spark's path does not guess (it infers the batch's shape):
    # the one-pass decoder takes only records of exactly the table's columns, as a guess would, and
    # so only where a guess would take conflicting values (records.guess).
    nested = table is not None and isinstance(decoder, JsonDecoder) and decoder.plain
    if schema is None and nested and settings.on_incompatible is IncompatiblePolicy.DEAD_LETTER:
        schema = ctx.catalog.spark_schema(table)
    if schema is None or not _keyed_table_fits(ctx, schema):
        return None
    spec = _change_spec(ctx, plan, table, schema) if cdc else None
    if cdc and spec is None:
        return None
    columns = direct_columns(schema, spec.keys if spec is not None else ())
    if columns is None:
        return None
    return DirectItem(item, columns, schema, changes=spec, key_column=_record_key(ctx))


def _new_json_schema(ctx: BatchContext, targets: Targets, item: Item) -> StructType | None:
    """A JSON table that does not exist yet: the columns Spark infers from the first
    `SAMPLE_RECORDS` records of each of its topic-partitions in the batch, where Spark's decoder
    infers them from all of its records. The direct decoder takes a record only when it is a row of
    exactly those columns, so a batch the sample does not represent (a key, or a wider type, only
    further on) is declined and goes Spark's way: the table comes out as it would have."""
    plan = item[0]
    decoder = ctx.decoder
    if not isinstance(decoder, JsonDecoder):
        return None
    sample = [
        PartitionRange(r.tp, r.first_offset, last, last - r.first_offset + 1)
        for r in own_ranges(plan, targets.ranges[plan.table])
        for last in [min(r.last_offset, r.first_offset + SAMPLE_RECORDS - 1)]
    ]
    return decoder.plain_columns(read_ranges(targets.batch.sparkSession, ctx.config, sample), nested=True)


def _avro_item(ctx: BatchContext, item: Item) -> DirectItem | None:
    _, table, planned = item
    decoder = ctx.decoder
    if ctx.config.decode.envelope is not Envelope.NONE or not isinstance(decoder, AvroDecoder):
        return None
    writers = decoder.writer_schemas(planned.values)
    if writers is None:
        return None
    schema: StructType | None
    if table is not None:
        schema = ctx.catalog.spark_schema(table)
    else:  # created with the writer schemas' columns, as the usual path would (records.decode_table)
        schema = StructType([])
        for _, text in sorted(writers.items()):
            struct = writer_struct(text)
            if struct is None or conflicts(schema, struct):
                return None
            schema = merged(schema, struct)
        schema = _with_key_column(ctx, schema)
    if schema is None or not _keyed_table_fits(ctx, schema):
        return None
    # The writer schemas fill the table's columns but the key column, which the tasks fill with
    # the record key (a required column when it is the table's key).
    key_column = _record_key(ctx)
    found = direct_avro(writers, StructType([f for f in schema.fields if f.name != key_column]))
    return DirectItem(item, found, schema, key_column=key_column) if found is not None else None


def _with_changes(ctx: BatchContext, found: DirectItem) -> DirectItem | None:
    """An Avro upsert or changelog table, when the one-pass job can write its changes (`_change_spec`).
    How many changes the job takes: `split_direct`."""
    plan, table, _ = found.item
    spec = _change_spec(ctx, plan, table, found.schema)
    return replace(found, changes=spec) if spec is not None else None


def _change_spec(ctx: BatchContext, plan: TablePlan, table: JavaObject | None, schema: StructType) -> ChangeSpec | None:
    """The table's keys and operation as Spark's path resolves them (records.change_spec), or None
    where that path reports a problem, reads an operation that is not a string, or orders changes
    by the rows the table holds."""
    settings = ctx.config.tables.settings_for(plan.table.name)
    try:
        key_type = StringType() if _record_key(ctx) is not None else None
        spec = change_spec(ctx, plan.table, settings, table, key_type, schema)
    except ConfigError:
        return None
    if spec.mode is WriteMode.CHANGELOG and not isinstance(schema[spec.operation_column].dataType, StringType):
        return None
    held = settings.order_by_scope is OrderScope.TABLE and table is not None and table.currentSnapshot() is not None
    return None if spec.order_by and held else spec


def split_direct(ctx: BatchContext, targets: Targets, todo: list[Item]) -> tuple[list[DirectItem], list[Item]]:
    """(the tables the direct job writes, the others)."""
    found = ctx.tables.map(todo, lambda item: direct_item(ctx, targets, item))  # a new JSON table's sample: a job
    # A task holds every change it reads until it has them all: the tables of changes the job
    # takes hold no more than Spark's path would give its tasks (the others take that path).
    budget = CHANGES_PER_TASK * ctx.spark.sparkContext.defaultParallelism
    for i, d in enumerate(found):
        if d is not None and d.changes is not None:
            budget -= d.item[0].records
            if budget < 0:
                found[i] = None
    direct = [d for d in found if d is not None]
    others = [item for item, d in zip(todo, found, strict=True) if d is None]
    return direct, others
