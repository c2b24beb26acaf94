"""The columns Spark's JSON inference (`JsonInferSchema`, with the options the job reads JSON with:
PERMISSIVE, `dropFieldIfAllNull`) finds in a sample of records, computed in Python: a new JSON
table's first batch needs them before anything is written, and a Spark job reading and inferring
the sample was most of that batch's planning (the demo's first batch: 1.6 of its 4.5 s).

Only samples whose inference is beyond doubt are inferred here: every record a JSON object that
Python's parser takes (stricter than Jackson's with Spark's options: no single quotes, NaN, leading
zeros, trailing text or control characters), of objects, arrays, strings, booleans, nulls and
numbers within a long or a finite double, no key twice in an object, no empty key. Anything else
(`None`) is left to Spark's inference, which makes the same columns the same way it always did.
Records Spark's path makes dead letters of, beyond doubt (tasks/dead_letters.json_problem: empty,
not JSON, a scalar or an array without objects), add no column there and none here.
The rules kept, as Spark has them:

- an integer is a long, a number with a fraction or an exponent a double, a string a string (no
  timestamp inference), true/false a boolean;
- an object is a struct of its fields sorted by name (Java's string order: UTF-16 code units),
  every field nullable; an array is an array (elements nullable) of its elements' common type;
- common types: a type with null is the type, long with double is double, structs merge their
  fields, arrays their elements; any other pair would be a string column in Spark (a value of one
  type in a column of another): not taken here;
- with `dropFieldIfAllNull`, a field that is null in every record (or an empty array, or a struct of
  such fields only) is no column.

Pure: no Spark session. Pinned against Spark's own inference in tests/spark/test_json_inference.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    NullType,
    StringType,
    StructField,
    StructType,
)

from icesink.kafka import wire
from icesink.tasks.dead_letters import json_problem

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


class _UnsureError(Exception):
    """A sample whose inference is left to Spark."""


def inferred(values: Iterable[bytes | None]) -> StructType | None:
    """The columns Spark infers from the records' values (nulls, tombstones, left out), or None
    when Spark's inference must say (see the module's docstring)."""
    row: DataType = NullType()
    # Records of a batch mostly share a few shapes: each distinct one is typed and merged once.
    shapes: set[Any] = set()
    try:
        for value in values:
            if value is None:
                continue
            record = _record(value)
            if record is None:
                continue
            shape = _shape(record)
            if shape not in shapes:
                shapes.add(shape)
                row = _common(row, _type_of(shape))
    except _UnsureError:
        return None
    kept = _without_nulls(row)
    return kept if isinstance(kept, StructType) else StructType([])


def _record(value: bytes) -> dict[str, Any] | None:
    """The record's object, or None for a value Spark's path makes a dead letter of (which adds no
    column: Spark's inference types it as the corrupt-record column, which the table does not get)."""
    try:
        record = _parsed(value)
    except _UnsureError:
        record = None
    if type(record) is dict:
        return record
    if json_problem(value) is None:
        raise _UnsureError
    return None


def _parsed(value: bytes) -> Any:
    try:
        return json.loads(wire.json_text(value).decode("utf-8"), object_pairs_hook=_object, parse_constant=_refused)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise _UnsureError from None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs) or "" in found:
        raise _UnsureError
    return found


def _refused(constant: str) -> Any:
    raise _UnsureError  # NaN, Infinity: Spark takes them as doubles only with an option


# A value's shape: its JSON type, with its fields' (an object: in its order) or its elements'
# (an array: the set of them) shapes; hashable, so equal shapes are typed once.
_SCALARS: dict[type, str] = {type(None): "null", bool: "boolean", str: "string", float: "double", int: "long"}


def _shape(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return ("struct", tuple([(k, _shape(v)) for k, v in value.items()]))
    if kind is list:
        return ("array", frozenset([_shape(v) for v in value]))
    if kind is int and not _LONG_MIN <= value <= _LONG_MAX:
        raise _UnsureError  # Spark: a decimal of its digits
    if kind is float and not math.isfinite(value):
        raise _UnsureError  # 1e400
    found = _SCALARS.get(kind)
    if found is None:
        raise _UnsureError
    return found


_TYPES: dict[str, DataType] = {
    "null": NullType(), "boolean": BooleanType(), "string": StringType(), "double": DoubleType(), "long": LongType()
}  # fmt: skip


def _type_of(shape: Any) -> DataType:
    if isinstance(shape, str):
        return _TYPES[shape]
    kind, parts = shape
    if kind == "array":
        element: DataType = NullType()
        for p in parts:
            element = _common(element, _type_of(p))
        return ArrayType(element, True)
    return _struct({k: _type_of(v) for k, v in parts})


def _struct(fields: dict[str, DataType]) -> StructType:
    # Java's String.compareTo orders by UTF-16 code units.
    names = sorted(fields, key=lambda n: n.encode("utf-16-be"))
    return StructType([StructField(n, fields[n], True) for n in names])


def _common(a: DataType, b: DataType) -> DataType:
    if isinstance(a, NullType):
        return b
    if isinstance(b, NullType) or a == b:
        return a
    if {type(a), type(b)} == {LongType, DoubleType}:
        return DoubleType()
    if isinstance(a, StructType) and isinstance(b, StructType):
        mine = {f.name: f.dataType for f in a.fields}
        for f in b.fields:
            mine[f.name] = _common(mine[f.name], f.dataType) if f.name in mine else f.dataType
        return _struct(mine)
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return ArrayType(_common(a.elementType, b.elementType), True)
    raise _UnsureError  # Spark: a string column


def _without_nulls(t: DataType) -> DataType | None:
    """`dropFieldIfAllNull`: what is never anything but null is no column."""
    if isinstance(t, NullType):
        return None
    if isinstance(t, ArrayType):
        element = _without_nulls(t.elementType)
        return ArrayType(element, True) if element is not None else None
    if isinstance(t, StructType):
        fields = []
        for f in t.fields:
            kept = _without_nulls(f.dataType)
            if kept is not None:
                fields.append(StructField(f.name, kept, True))
        return StructType(fields) if fields else None
    return t
