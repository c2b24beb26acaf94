"""A table's schema evolved in one metadata commit through Iceberg's Java API: new optional
columns, promoted types, required columns made optional (the changes schema/evolution.py plans).

Each change is checked against the table as refreshed first, so running it again (a replay, a
concurrent job that evolved the table first) commits nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from icesink.iceberg import table_layout
from icesink.iceberg.jvm import JavaObject, java_list
from icesink.schema.evolution import AddColumn, WidenColumn


def evolve(
    jvm: Any,
    table: JavaObject,
    add: Sequence[AddColumn] = (),
    widen: Sequence[WidenColumn] = (),
    optional: Sequence[str] = (),
) -> list[str]:
    """The changes committed (none: nothing was left to change, and nothing was committed). The
    caller has refreshed `table`."""
    ice = jvm.org.apache.iceberg
    schema = table.schema()
    have = {str(n) for n in _elements(jvm, ice.types.TypeUtil.indexByName(schema.asStruct()).keySet())}
    identifiers = {str(schema.findColumnName(i)) for i in _elements(jvm, schema.identifierFieldIds())}
    todo_add = [c for c in add if c.path not in have]
    todo_widen = []
    for w in widen:
        field = schema.findField(w.path)
        new_type = iceberg_type(jvm, w.new)
        if field is not None and not field.type().equals(new_type):
            todo_widen.append((w, new_type))
    todo_optional = [p for p in optional if p not in identifiers and _required(schema.findField(p))]
    if not (todo_add or todo_widen or todo_optional):
        return []
    update = table.updateSchema()
    for c in todo_add:
        if c.parent is None:
            update.addColumn(c.name, iceberg_type(jvm, c.type))
        else:
            update.addColumn(c.parent, c.name, iceberg_type(jvm, c.type))
    for w, new_type in todo_widen:
        update.updateColumn(w.path, new_type)
    for p in todo_optional:
        update.makeColumnOptional(p)
    update.commit()
    changes = [f"added {c.path}" for c in todo_add]
    changes += [f"widened {w.path} {w.old.simpleString()} -> {w.new.simpleString()}" for w, _ in todo_widen]
    return changes + [f"made {p} optional" for p in todo_optional]


def _required(field: JavaObject | None) -> bool:
    return field is not None and bool(field.isRequired())


def _elements(jvm: Any, collection: JavaObject) -> list[Any]:
    """The elements of any java.util.Collection (see `java_list`), in its iteration order."""
    return java_list(jvm.java.util.ArrayList(collection))


def iceberg_type(jvm: Any, dtype: Any) -> JavaObject:
    """The Iceberg type of a Spark type (py4j picks convert(StructType) -> Schema for structs)."""
    converted = jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(table_layout.spark_jtype(jvm, dtype))
    if converted.getClass().getName() == "org.apache.iceberg.Schema":
        return converted.asStruct()
    return converted
