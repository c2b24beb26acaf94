"""Plain JSON records straight to Arrow columns, in Python, for the one-pass write (batch/direct.py).

It takes a record only when the row is beyond doubt the one Spark's decoder would make with the
table's own schema (decode/json.py, the guessed pass): a JSON object whose keys are all columns of
the table, each value of exactly the column's type (an integer within range for a long, a number
for a double, a string, a boolean, an array of those, or null). Anything else, it declines: a key
the table lacks, a value of another type (Spark turns a number into a string column's text; this
path does not try), text that is not valid UTF-8 or JSON, a tombstone. A declined record sends all
of its table's records of the batch the usual way (Spark's decoder, the second pass, dead
letters), so this module never decides what a doubtful record means. Pure: no Spark.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.types import ArrayType, BooleanType, DataType, DoubleType, LongType, StringType, StructType

_MIN_LONG, _MAX_LONG = -(2**63), 2**63 - 1
# Integers a double column takes as they are; a larger one is declined rather than rounded here
# the way Spark might not.
_EXACT_IN_DOUBLE = 2**53

_KINDS: dict[type[DataType], tuple[str, pa.DataType]] = {
    LongType: ("long", pa.int64()),
    DoubleType: ("double", pa.float64()),
    StringType: ("string", pa.string()),
    BooleanType: ("boolean", pa.bool_()),
}
_ARROW_TYPES = dict(_KINDS.values())  # kind -> Arrow type


@dataclass(frozen=True)
class DirectColumn:
    name: str
    kind: str  # long, double, string or boolean: the column's type, or its elements' for an array
    array: bool = False

    @property
    def arrow_type(self) -> pa.DataType:
        element = _ARROW_TYPES[self.kind]
        return pa.list_(element) if self.array else element


def direct_columns(schema: StructType) -> tuple[DirectColumn, ...] | None:
    """The table's columns as this decoder fills them, or None when it cannot fill every one: a
    type it does not take (timestamps, decimals, structs, ...), a required column, an array
    whose elements cannot be null."""
    out = []
    for f in schema.fields:
        t = f.dataType
        if not f.nullable:
            return None
        array = isinstance(t, ArrayType)
        if isinstance(t, ArrayType):
            if not t.containsNull:
                return None
            t = t.elementType
        found = _KINDS.get(type(t))
        if found is None:
            return None
        out.append(DirectColumn(f.name, found[0], array))
    return tuple(out) if out else None


def _is_long(v: Any) -> bool:
    return type(v) is int and _MIN_LONG <= v <= _MAX_LONG


def _is_double(v: Any) -> bool:
    if type(v) is float:
        return math.isfinite(v) or math.isnan(v)
    return type(v) is int and -_EXACT_IN_DOUBLE <= v <= _EXACT_IN_DOUBLE


def _is_string(v: Any) -> bool:
    return type(v) is str


def _is_boolean(v: Any) -> bool:
    return type(v) is bool


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "long": _is_long,
    "double": _is_double,
    "string": _is_string,
    "boolean": _is_boolean,
}


def _check(column: DirectColumn) -> Callable[[Any], bool]:
    element = _CHECKS[column.kind]
    if not column.array:
        return lambda v: v is None or element(v)
    return lambda v: v is None or (type(v) is list and all(e is None or element(e) for e in v))


def json_object(value: bytes | None) -> dict[str, Any] | None:
    """The record's JSON object (unframed if Confluent's JSONSerializer framed it, as
    json_rows.json_text does), or None when it is anything else."""
    if value is None:
        return None
    if len(value) >= 5 and value[0] == 0:
        value = value[5:]
    try:
        found = json.loads(value.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return found if type(found) is dict else None


class DirectRows:
    """One table's rows, a column at a time, from the records `add` takes."""

    def __init__(self, columns: Sequence[DirectColumn]) -> None:
        self._columns = tuple(columns)
        self._names = frozenset(c.name for c in columns)
        self._checks = [(c.name, _check(c)) for c in columns]
        self._values: list[list[Any]] = [[] for _ in columns]
        self.rows = 0

    def add(self, value: bytes | None) -> bool:
        """Takes the record's row; False (and nothing taken) when the record is declined."""
        found = json_object(value)
        if found is None or not self._names.issuperset(found):
            return False
        row = []
        for name, check in self._checks:
            v = found.get(name)
            if not check(v):
                return False
            row.append(v)
        for values, v in zip(self._values, row, strict=True):
            values.append(v)
        self.rows += 1
        return True

    def take(self) -> pa.RecordBatch | None:
        """The rows taken since the last call as one Arrow batch (None if there are none); raises
        pyarrow's error for a value Arrow refuses (a string with a lone surrogate)."""
        if not self.rows:
            return None
        arrays = [pa.array(v, c.arrow_type) for v, c in zip(self._values, self._columns, strict=True)]
        self._values = [[] for _ in self._columns]
        self.rows = 0
        return pa.RecordBatch.from_arrays(arrays, names=[c.name for c in self._columns])
