"""Step 2, decode: one table's records of the batch as rows of the table's (evolved) schema.

Per table: decode the keys, inspect the values (registry ids, inferred JSON types), derive the
target schema (the table's, plus the batch's new columns, spelled and flattened as the table
wants), refuse or let through an incompatible schema by policy, parse, and for upsert/changelog
tables classify each change. Inspecting runs small Spark jobs (JSON schema inference, the Connect
schemas of the batch); the parse itself is lazy: Spark expressions the write step executes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField, StructType

from icesink.batch import changes
from icesink.batch import shape as shaping
from icesink.batch.changes import ChangeSpec
from icesink.batch.context import BatchContext
from icesink.batch.decode import ERROR, ROW, Inspected, is_pending, no_error, pending
from icesink.batch.decode.keys import KEY_ERROR, KEY_ROW, decode_keys, string_keys
from icesink.batch.plan import TablePlan
from icesink.batch.seen_schemas import with_schema_refs
from icesink.batch.shape import FlatColumn
from icesink.batch.work import Planned, TableWork, partition_fields
from icesink.config import IncompatiblePolicy, KeyFormat, TableSettings, WriteMode
from icesink.errors import ConfigError, SchemaConflictError
from icesink.iceberg.jvm import JavaObject
from icesink.model import TableRef
from icesink.schema import evolution, partitioning

log = logging.getLogger(__name__)


def decode_tables(
    ctx: BatchContext, records: Mapping[TableRef, DataFrame],
    todo: list[tuple[TablePlan, JavaObject | None, Planned]],
) -> list[TableWork]:  # fmt: skip
    """Each table's `records` (those it does not hold yet) decoded with its guess."""

    def decode(item: tuple[TablePlan, JavaObject | None, Planned]) -> TableWork:
        plan, table, planned = item
        return decode_table(ctx, records[plan.table], plan, table, planned)

    return ctx.tables.map(todo, decode)


def guess(ctx: BatchContext, plan: TablePlan, table: JavaObject | None) -> Planned:
    """What to decode a table's records with in one pass (see `Decoder.guess`): the schemas its
    topics carried last time or the registry's latest (Avro), or the table's own columns (JSON;
    not for a table that does not exist yet, nor one that spells or nests columns unlike the
    records, flattened or case-insensitive, or refuses conflicting types)."""
    settings = ctx.config.tables.settings_for(plan.table.name)
    current = ctx.catalog.spark_schema(table) if table is not None else StructType([])
    key_column = ctx.config.decode.key_column
    keyed = ctx.key_decoder is not None or ctx.config.decode.key_format is KeyFormat.STRING
    # A shape guess parses with the table's types, which take some values a look at the batch
    # would call a conflict (an integer for a string column): only where conflicts are let through.
    as_records = table is not None and not settings.flatten_separator and not settings.case_insensitive
    as_records = as_records and settings.on_incompatible is IncompatiblePolicy.DEAD_LETTER
    value_shape = StructType([f for f in current.fields if not (keyed and f.name == key_column)])
    key_shape = current[key_column].dataType if key_column in current.fieldNames() else None
    topics = plan.topics
    values = ctx.decoder.guess(ctx.seen.expected("value", topics), value_shape if as_records else None, topics)
    keys = None
    if ctx.key_decoder is not None:
        keys = ctx.key_decoder.guess(ctx.seen.expected("key", topics), key_shape if as_records else None, topics)
    return Planned(values, keys)


def decode_table(
    ctx: BatchContext, records: DataFrame, plan: TablePlan, table: JavaObject | None, planned: Planned
) -> TableWork:
    """The table's `records` (those of the batch it takes and does not hold yet), decoded."""
    current = ctx.catalog.spark_schema(table) if table is not None else StructType([])
    settings = ctx.config.tables.settings_for(plan.table.name)
    key_column = ctx.config.decode.key_column
    key_type: DataType | None = None
    parsed = with_schema_refs(records, ctx.decoder, ctx.key_decoder)
    if ctx.key_decoder is not None:
        guessed = planned.keys is not None
        parsed, key_type = decode_keys(parsed, ctx.key_decoder, key_column, current, planned.keys, guessed)
    elif ctx.config.decode.key_format is KeyFormat.STRING:
        parsed, key_type = string_keys(parsed)
    inspected = ctx.decoder.inspect(parsed, planned.values, planned.values is not None)
    nested = _nested(inspected.schema, key_type, key_column, settings)
    flat, incoming = _incoming(nested, current, settings)
    target = evolution.merged(current, incoming)
    _check_compatible(plan.table, settings, target, incoming)
    parsed = _parsed(inspected, nested, target, flat is not None, settings)
    if key_type is not None:
        # The key joins the row.
        parsed = parsed.withColumn(ROW, F.col(ROW).withField(key_column, F.col(KEY_ROW)))
    if flat is not None:
        parsed = shaping.flatten(parsed, target, flat)
    key = F.col(KEY_ROW) if key_type is not None else None
    key_error = F.col(KEY_ERROR) if key_type is not None else no_error()
    spec = None
    if settings.is_cdc and target.fields:
        spec = change_spec(ctx, plan.table, settings, table, key_type, target)
        parsed = changes.classify(parsed, spec, target, key, key_error)
    elif key_type is not None:
        # A value error is reported before a key error.
        parsed = parsed.withColumn(ERROR, F.coalesce(F.col(ERROR), key_error))
    if planned.guessed:
        # Pending on either side: the whole record waits for the second pass.
        waits = is_pending(ERROR)
        if key_type is not None:
            waits = waits | is_pending(KEY_ERROR)
        parsed = parsed.withColumn(ERROR, F.when(waits, pending()).otherwise(F.col(ERROR)))
    parsed = parsed.drop(KEY_ROW, KEY_ERROR)
    return TableWork(plan, table, target, parsed, settings, spec, records, planned)


def _nested(values: StructType, key_type: DataType | None, key_column: str, settings: TableSettings) -> StructType:
    """The batch's row schema as decoded: the values' fields, the key column, and for upsert/changelog
    tables the key fields the values lack (or a batch of tombstones only), which still become columns."""
    fields = list(values.fields)
    if key_type is not None:
        fields.append(StructField(key_column, key_type))
    if settings.is_cdc and isinstance(key_type, StructType) and values.fields:
        have = {f.name for f in fields}
        keys = set(settings.key_columns) if settings.key_columns else set(key_type.fieldNames())
        fields += [f for f in key_type.fields if f.name not in have and f.name in keys]
    return StructType(fields)


def _incoming(
    nested: StructType, current: StructType, settings: TableSettings
) -> tuple[list[FlatColumn] | None, StructType]:
    """The batch's columns as the table spells them (flattened, or respelled ignoring case), with the
    flat columns when the table flattens."""
    sep = settings.flatten_separator
    flat = shaping.flat_columns(nested, sep, current, settings.case_insensitive) if sep else None
    if flat is not None:
        return flat, StructType([StructField(c.column, c.type, True) for c in flat])
    if settings.case_insensitive:
        return None, evolution.respelled(nested, current)
    return None, nested


def _parsed(
    inspected: Inspected, nested: StructType, target: StructType, flat: bool, settings: TableSettings
) -> DataFrame:
    # Decoders match names exactly and keep nesting: parse in the batch's spelling and shape.
    if flat:
        return inspected.parse(nested)
    if settings.case_insensitive:
        parse_target = evolution.respelled(target, nested)
        return shaping.respell(inspected.parse(parse_target), target, parse_target)
    return inspected.parse(target)


def _check_compatible(ref: TableRef, settings: TableSettings, target: StructType, incoming: StructType) -> None:
    problems = evolution.conflicts(target, incoming)
    if problems and settings.on_incompatible is IncompatiblePolicy.FAIL:
        raise SchemaConflictError(
            f"table {ref}: the records' schema cannot evolve the table: {'; '.join(problems)}. Nothing of this "
            "batch was committed; fix the producer, or set tables.on_incompatible: dead-letter"
        )


def change_spec(
    ctx: BatchContext,
    ref: TableRef,
    settings: TableSettings,
    table: JavaObject | None,
    key_type: DataType | None,
    target: StructType,
) -> ChangeSpec:
    identifiers = ctx.catalog.identifier_columns(table) if table is not None else []
    key_column = ctx.config.decode.key_column
    keys = changes.resolve_keys(str(ref), settings.key_columns, identifiers, key_type, key_column, target)
    fields = ctx.catalog.partition_fields(table) if table is not None else partition_fields(settings)
    try:
        partitioning.check_within_keys(fields, keys)
    except ValueError as e:
        raise ConfigError(f"table {ref}: {e}") from None
    names = target.fieldNames()
    op_column = ctx.config.decode.operation_column
    if settings.mode is WriteMode.CHANGELOG and op_column not in names:
        raise ConfigError(
            f"table {ref}: changelog mode reads the operation from column {op_column}, which its rows "
            f"do not have; set decode.operation_column, or use tables.mode upsert"
        )
    if settings.order_by and settings.order_by not in names:
        raise ConfigError(f"table {ref}: order_by column {settings.order_by} is not a column of its rows")
    return ChangeSpec(settings.mode, keys, op_column, key_column, settings.order_by)
