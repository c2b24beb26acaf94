"""Change planning for upsert and changelog tables: which rows a batch deletes and which it adds.

Each record gets an operation (I/U/D). A null value on a keyed topic (a tombstone) is a delete; a
change without its key, or with an operation that is not I, U or D, is an error like any other
decode error (a dead letter, or a failed batch). The batch is then reduced to the LAST change per
key (by the writer, tasks/last_changes.py); the commit writes an equality delete for every key the
batch touched and a row for every key whose last change is not a delete. Iceberg applies equality
deletes only to rows of earlier commits, so the rows added in the same commit survive their own
key's delete.

Key resolution is pure; the rest composes Spark expressions and runs on the executors.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DoubleType,
    FloatType,
    MapType,
    StructType,
)

from icesink.batch.decode import ERROR, ROW, error, fenced, no_error
from icesink.config import WriteMode
from icesink.errors import ConfigError
from icesink.tasks.change_rows import DELETE, INSERT, OP, OP_CODES, UPDATE, ChangeSpec

__all__ = ["DELETE", "INSERT", "OP", "OP_CODES", "UPDATE", "ChangeSpec"]  # the words of changes, kept by the tasks


def _unfit_key_type(t: DataType) -> str | None:
    if isinstance(t, StructType | ArrayType | MapType):
        return "a nested type"
    if isinstance(t, FloatType | DoubleType):
        return "a floating-point type"
    return None


def resolve_keys(
    table: str,
    configured: Sequence[str],
    identifiers: Sequence[str],
    key_type: DataType | None,
    key_column: str,
    row: StructType,
) -> tuple[str, ...]:
    """The key columns of an upsert/changelog table: configured ones, else the existing table's
    identifier fields, else the record key's fields (a struct key) or the key column (a string key).
    Raises ConfigError naming the table when there is none or one does not fit."""
    columns = {f.name: f.dataType for f in row.fields}
    if configured:
        keys, source = tuple(configured), "tables.key_columns"
    elif identifiers:
        keys, source = tuple(identifiers), "the table's identifier fields"
    elif isinstance(key_type, StructType):
        keys, source = tuple(key_type.fieldNames()), "the record key's fields"
    elif key_type is not None:
        keys, source = (key_column,), "the record key"
    else:
        raise ConfigError(
            f"table {table}: upsert/changelog tables need key columns: set tables.key_columns (or "
            "tables.per_table.<table>.key_columns), or decode the record key (decode.key_format)"
        )
    if not row.fields:
        return keys
    missing = [k for k in keys if k not in columns]
    if missing:
        raise ConfigError(
            f"table {table}: key column(s) {missing} (from {source}) are not columns of its rows "
            f"{sorted(columns)}; set tables.key_columns"
        )
    for k in keys:
        why = _unfit_key_type(columns[k])
        if why:
            raise ConfigError(f"table {table}: key column {k} is {why}, which cannot be an equality-delete key")
    return keys


def _operation(spec: ChangeSpec, row: Column) -> tuple[Column, Column]:
    """(the I/U/D code, the raw value it came from) of a non-tombstone record."""
    if spec.mode is WriteMode.UPSERT:
        return F.lit(UPDATE), F.lit(UPDATE)
    raw = row[spec.operation_column].cast("string")
    codes = F.create_map(*[x for k, v in OP_CODES.items() for x in (F.lit(k), F.lit(v))])
    return F.element_at(codes, F.lower(F.trim(raw))), raw


def classify(
    parsed: DataFrame, spec: ChangeSpec, target: StructType, key: Column | None, key_error: Column
) -> DataFrame:
    """`parsed` with OP set and ROW/ERROR fixed for changes: a tombstone becomes a delete whose
    row holds only the key, taken from the record key (`key`, decoded); a change without its key
    columns, or with an unknown operation, gets an error."""
    key_type_fields: set[str] = set()
    if key is not None:
        kt = parsed.select(key.alias("k")).schema["k"].dataType
        if isinstance(kt, StructType):
            key_type_fields = set(kt.fieldNames())

    def from_key(name: str) -> Column | None:
        if key is None:
            return None
        if name == spec.key_column:
            return key
        if name in spec.keys and name in key_type_fields:
            return key[name]
        return None

    tomb_fields = []
    for f in target.fields:
        value = from_key(f.name)
        tomb_fields.append(
            (value.cast(f.dataType) if value is not None else F.lit(None).cast(f.dataType)).alias(f.name)
        )
    tombstone = F.col("value").isNull()
    # The target's columns only (a decoder's row may carry helper fields); a value without its key
    # columns takes them from the record key, where the key has them.
    decoded = F.col(ROW)
    value_fields = []
    for f in target.fields:
        value = from_key(f.name) if f.name in spec.keys else None
        expr = decoded[f.name] if value is None else F.coalesce(decoded[f.name], value.cast(f.dataType))
        value_fields.append(expr.alias(f.name))
    value_row = F.when(decoded.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*value_fields))
    row = F.when(tombstone, F.struct(*tomb_fields)).otherwise(value_row)
    op, raw = _operation(spec, F.col(ROW))
    op = F.when(tombstone, F.lit(DELETE)).otherwise(op)
    missing = [F.when(row[k].isNull(), F.lit(k)) for k in spec.keys]
    missing_names = F.concat_ws(", ", F.array_compact(F.array(*missing))) if missing else F.lit("")
    # A tombstone is a delete of its record key: a key that does not decode, or lacks a key
    # column, is a dead letter (never a delete with a null key, which no file may hold).
    err = (
        F.when(
            tombstone & (F.col("key").isNull()),
            error("change", "NullValue", "null value and null key: no row to delete"),
        )
        .when(tombstone & key_error.isNotNull(), key_error)
        .when(
            tombstone & (missing_names != ""),
            error(
                "change",
                "MissingKey",
                F.concat(F.lit("a tombstone whose record key has no value for key column(s) "), missing_names),
            ),
        )
        .when(tombstone, no_error())
        .when(F.col(ERROR).isNotNull(), F.col(ERROR))
        .when(key_error.isNotNull(), key_error)
        .when(
            op.isNull(),
            error(
                "change",
                "UnknownOperation",
                F.concat(
                    F.lit(f"operation column {spec.operation_column} holds "),
                    F.coalesce(F.concat(F.lit("'"), raw, F.lit("'")), F.lit("null")),
                    F.lit(", not I, U or D"),
                ),
            ),
        )
        .when(
            missing_names != "",
            error("change", "MissingKey", F.concat(F.lit("no value for key column(s) "), missing_names)),
        )
        .otherwise(no_error())
    )
    return parsed.withColumn(ROW, row).withColumn(OP, op).withColumn(ERROR, fenced(err))


HELD = "__icesink_held"  # the order_by value of the row a table holds for a key


def held_rows(spark: SparkSession, table: str, snapshot_id: int, spec: ChangeSpec) -> DataFrame:
    """The keys and `order_by` values (as HELD) of the rows `table` (catalog.namespace.name) holds
    at `snapshot_id`: what a batch's changes are compared with when ordered across batches (Spark's
    path's join, batch/write.py; the one-pass second round's rows, batch/direct_held.py). A filter
    on HELD reaches Iceberg's scan as one on the order column, so its bounds skip files."""
    assert spec.order_by is not None
    rows = spark.read.format("iceberg").option("versionAsOf", str(snapshot_id)).load(table)
    return rows.select(*[F.col(f"`{k}`") for k in spec.keys], F.col(f"`{spec.order_by}`").alias(HELD))


def change_order(spec: ChangeSpec) -> list[Column]:
    """The columns that order a key's changes, most significant first: `order_by` (if set), then
    the Kafka topic, partition and offset. Topic order matters only when one key arrives on several
    topics of a batch; daily topics sort by their date suffix. The writer keeps each key's greatest
    (tasks/last_changes.py)."""
    order = [F.col(f"`{spec.order_by}`")] if spec.order_by else []
    return [*order, F.col("topic"), F.col("partition"), F.col("offset")]
