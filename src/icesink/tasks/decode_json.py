"""Plain JSON records straight to Arrow columns, in Python, for the one-pass write (batch/direct.py).

It takes a record only when the row is beyond doubt the one Spark's decoder would make with the
table's own schema (decode/json.py, the guessed pass): a JSON object whose keys are all columns of
the table, each value of exactly the column's type (an integer within range for a long, a number
for a double, a string, a boolean, an array of those, or null). Anything else, it declines: a key
the table lacks, a value of another type (Spark turns a number into a string column's text; this
path does not try), text that is not valid UTF-8 or JSON, a tombstone. A declined record sends all
of its table's records of the batch the usual way (Spark's decoder, the second pass, dead
letters), so this module never decides what a doubtful record means. Pure: no Spark.

Records are parsed by orjson (half the time of Python's reader) and checked a column at a time.
One difference from Python's reader: orjson reads an integer beyond 64 bits as the nearest
double, which a double column takes as Spark does (pinned against Spark in
tests/spark/test_json_direct.py); a long column refuses it either way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import ArrayType, BooleanType, DataType, DoubleType, LongType, StringType, StructType

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


def direct_columns(schema: StructType, keys: Sequence[str] = ()) -> tuple[DirectColumn, ...] | None:
    """The table's columns as this decoder fills them, or None when it cannot fill every one: a
    type it does not take (timestamps, decimals, structs, ...), a required column (but a key
    column of a table of changes, whose changes without a value the task declines), an array whose
    elements cannot be null."""
    out = []
    for f in schema.fields:
        t = f.dataType
        if not f.nullable and f.name not in keys:
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


# The Python types of the values a column takes (None aside; bool is not int here). Arrow refuses
# the rest: a long out of range (OverflowError), an integer a double does not hold exactly (beyond
# 2**53, ArrowInvalid), a string with a lone surrogate (UnicodeError).
_TYPES: dict[str, frozenset[type]] = {
    "long": frozenset({int, type(None)}),
    "double": frozenset({float, int, type(None)}),
    "string": frozenset({str, type(None)}),
    "boolean": frozenset({bool, type(None)}),
}
_LISTS = frozenset({list, type(None)})


class DeclinedValueError(ValueError):
    """A value of a column that is not of its type: its table's records go through Spark."""


def _array(column: DirectColumn, values: Sequence[Any]) -> pa.Array:
    """One column of rows as Arrow, checked a column at a time (set(map(type, ...)) runs in C:
    per record and column, a Python check cost more than parsing the record)."""
    kinds = _TYPES[column.kind]
    if column.array:
        if not set(map(type, values)) <= _LISTS:
            raise DeclinedValueError(column.name)
        elements = chain.from_iterable(v for v in values if v is not None)
        if not set(map(type, elements)) <= kinds:
            raise DeclinedValueError(column.name)
    elif not set(map(type, values)) <= kinds:
        raise DeclinedValueError(column.name)
    array = pa.array(values, column.arrow_type)
    if column.kind == "double":
        # Infinity (or 1e999) is left to Spark; NaN is taken, as Spark takes it.
        flat = array.flatten() if column.array else array
        if pc.any(pc.is_inf(flat)).as_py():
            raise DeclinedValueError(column.name)
    return array


def json_object(value: bytes | None) -> dict[str, Any] | None:
    """The record's JSON object (unframed if Confluent's JSONSerializer framed it, as
    json_rows.json_text does), or None when it is anything else."""
    if value is None:
        return None
    if len(value) >= 5 and value[0] == 0:
        value = value[5:]
    try:
        found = orjson.loads(value)
    except orjson.JSONDecodeError:
        # What orjson refuses and Python's reader takes (NaN, Infinity, 1e999, a lone surrogate),
        # read as this decoder read it before orjson: the column checks decide.
        try:
            found = json.loads(value.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None
    return found if type(found) is dict else None


class DirectRows:
    """One table's rows, from the records `add` takes, as Arrow columns (`take`). With `carry`,
    each row keeps the Kafka coordinates `add` was given (a table of changes orders by them)."""

    def __init__(self, columns: Sequence[DirectColumn], carry: bool = False) -> None:
        self._columns = tuple(columns)
        self._names = frozenset(c.name for c in columns)
        self._order = tuple(c.name for c in columns)
        self._rows: list[tuple[Any, ...]] = []
        self._carry = carry
        self._coordinates: list[tuple[str, int, int]] = []

    @property
    def rows(self) -> int:
        return len(self._rows)

    def add(self, value: bytes | None, coordinates: tuple[str, int, int] | None = None) -> bool:
        """Takes the record's row (and, with `carry`, its topic, partition and offset); False (and
        nothing taken) when the record is not a JSON object of the table's columns. Its values'
        types are checked by `take`."""
        found = json_object(value)
        if found is None or not self._names.issuperset(found):
            return False
        get = found.get
        self._rows.append(tuple([get(n) for n in self._order]))
        if self._carry:
            assert coordinates is not None
            self._coordinates.append(coordinates)
        return True

    def take(self) -> pa.RecordBatch | None:
        """The rows taken since the last call as one Arrow batch (None if there are none); raises
        `DeclinedValueError` for a value not of its column's type, and Arrow's error for one Arrow refuses."""
        if not self._rows:
            return None
        rows, self._rows = self._rows, []
        arrays = [_array(c, v) for c, v in zip(self._columns, zip(*rows, strict=True), strict=True)]
        names = list(self._order)
        if self._carry:
            coordinates, self._coordinates = self._coordinates, []
            topics, partitions, offsets = zip(*coordinates, strict=True)
            carried = [pa.array(topics, pa.string()), pa.array(partitions, pa.int32()), pa.array(offsets, pa.int64())]
            arrays, names = [*carried, *arrays], ["topic", "partition", "offset", *names]
        return pa.RecordBatch.from_arrays(arrays, names=names)
