"""Plain JSON records straight to Arrow columns, in Python, for the one-pass write (batch/direct.py).

It takes a record only when the row is beyond doubt the one Spark's decoder would make with the
table's own schema (decode/json.py, the guessed pass): a JSON object whose keys are all columns of
the table, each value of exactly the column's type (an integer within range for a long, a number
for a double, a string, a boolean, an array of those, or null). Anything else, it declines: a key
the table lacks, a value of another type (Spark turns a number into a string column's text; this
path does not try), text that is not valid UTF-8 or JSON, a tombstone. A declined record sends all
of its table's records of the batch the usual way (Spark's decoder, the second pass, dead
letters) unless it is beyond doubt a dead letter there (tasks/dead_letters.json_problem, judged
by the task's loop), so this module never decides what a doubtful record means. Pure: no Spark.

Records are parsed by orjson (half the time of Python's reader) and checked a column at a time.
One difference from Python's reader: orjson reads an integer beyond 64 bits as the nearest
double, which a double column takes as Spark does (pinned against Spark in
tests/spark/test_json_direct.py); a long column refuses it either way. A table's rows of such
records are gathered by tasks/plain_rows.py.

A batch of records whose every one is a plain JSON object is first parsed whole by Arrow's JSON
reader with the table's columns as its schema (`parsed_columns`, a third of the time): it refuses
what the record-at-a-time check refuses (a key the table lacks, at any depth; a value of another
type; a long that is not an integer; a repeated key), and what it takes that the check would not
(invalid UTF-8, NaN and infinities, a double of 2**53 or more, a negative zero, more or fewer
objects than records) sends the batch the record-at-a-time way, which decides it as before. A
field-routed topic's routing field may be read alone first (`parsed_field`: tasks/json_batches.py).
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
import pyarrow.json as pa_json
from pyspark.sql.types import ArrayType, BooleanType, DataType, DoubleType, LongType, StringType, StructType

from icesink.kafka import wire

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
    # long, double, string, boolean or struct: the column's type, or its elements' for an array
    kind: str
    array: bool = False
    fields: tuple[DirectColumn, ...] = ()  # a struct's fields

    @property
    def arrow_type(self) -> pa.DataType:
        if self.kind == "struct":
            element = pa.struct([pa.field(f.name, f.arrow_type) for f in self.fields])
        else:
            element = _ARROW_TYPES[self.kind]
        return pa.list_(element) if self.array else element


def direct_columns(schema: StructType, keys: Sequence[str] = ()) -> tuple[DirectColumn, ...] | None:
    """The table's columns as this decoder fills them, or None when it cannot fill every one: a
    type it does not take (timestamps, decimals, structs, ...), a required column (but a key
    column of a table of changes, whose changes without a value the task declines), an array whose
    elements cannot be null."""
    out = []
    for f in schema.fields:
        if not f.nullable and f.name not in keys:
            return None
        column = _column(f.name, f.dataType)
        if column is None:
            return None
        out.append(column)
    return tuple(out) if out else None


def direct_column(name: str, t: DataType) -> DirectColumn | None:
    """A column of type `t` as this decoder fills it (a record key's struct column too), or None."""
    return _column(name, t)


def _column(name: str, t: DataType) -> DirectColumn | None:
    """A column of type `t` as this decoder fills it: a simple type, a struct of such columns
    (nullable, at any depth), or an array of either whose elements may be null."""
    array = isinstance(t, ArrayType)
    if isinstance(t, ArrayType):
        if not t.containsNull or isinstance(t.elementType, ArrayType):
            return None
        t = t.elementType
    if isinstance(t, StructType):
        fields = [_column(f.name, f.dataType) if f.nullable else None for f in t.fields]
        if not fields or any(f is None for f in fields):
            return None
        return DirectColumn(name, "struct", array, tuple(f for f in fields if f is not None))
    found = _KINDS.get(type(t))
    return DirectColumn(name, found[0], array) if found is not None else None


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


# What Arrow raises for a value it does not take (a string with a lone surrogate, an integer out of
# range), and the decoders for a value Spark's path may read otherwise: either declines.
DECLINED = (pa.ArrowException, UnicodeError, OverflowError, DeclinedValueError)


_DICTS = frozenset({dict, type(None)})


def check(column: DirectColumn, values: Sequence[Any]) -> None:
    """Raises DeclinedValueError unless every value is of the column's type (set(map(type, ...))
    runs in C: per record and column, a Python check cost more than parsing the record). A
    struct's values are objects of its fields only, each checked the same way."""
    if column.array:
        if not set(map(type, values)) <= _LISTS:
            raise DeclinedValueError(column.name)
        values = list(chain.from_iterable(v for v in values if v is not None))
    if column.kind != "struct":
        if not set(map(type, values)) <= _TYPES[column.kind]:
            raise DeclinedValueError(column.name)
        return
    if not set(map(type, values)) <= _DICTS:
        raise DeclinedValueError(column.name)
    names = frozenset(f.name for f in column.fields)
    objects = [v for v in values if v is not None]
    if not all(names.issuperset(v) for v in objects):
        raise DeclinedValueError(column.name)  # a field the struct lacks: Spark's inference widens it
    for f in column.fields:
        check(f, [v.get(f.name) for v in objects])


def doubles_of(column: DirectColumn, array: pa.Array) -> list[pa.Array]:
    """The double columns of `array` (of `column`), at any depth, flattened."""
    flat = array.flatten() if column.array else array
    if column.kind == "double":
        return [flat]
    if column.kind != "struct":
        return []
    return [d for i, f in enumerate(column.fields) for d in doubles_of(f, flat.field(i))]


def checked_array(column: DirectColumn, values: Sequence[Any]) -> pa.Array:
    """One column of rows as Arrow, checked a column at a time."""
    check(column, values)
    array = pa.array(values, column.arrow_type)
    # Infinity (or 1e999) is left to Spark; NaN is taken, as Spark takes it.
    for doubles in doubles_of(column, array):
        if pc.any(pc.is_inf(doubles)).as_py():
            raise DeclinedValueError(column.name)
    return array


def json_object(value: bytes | None) -> dict[str, Any] | None:
    """The record's JSON object (unframed if Confluent's JSONSerializer framed it, as
    json_rows.json_text does), or None when it is anything else."""
    if value is None:
        return None
    value = wire.json_text(value)
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


_EXACT = float(2**53)  # from here on, a double does not hold every integer
_MAX_BLOCK = 2**31 - 1  # the most bytes Arrow's reader takes as one block


def parsed_columns(columns: Sequence[DirectColumn], values: Sequence[bytes]) -> list[pa.Array] | None:
    """The table's columns of `values` (each a record's value) parsed at once by Arrow's JSON
    reader, equal to what `checked_array` makes of them a record at a time; None when Arrow's
    reader may not read them as that would (then the caller takes them a record at a time, which
    decides each as before)."""
    schema = pa.schema([pa.field(c.name, c.arrow_type) for c in columns])
    table = read_whole(schema, values, "error")
    if table is None or table.num_rows != len(values):  # a value of two objects is not one row
        return None
    arrays = [table.column(i).combine_chunks() for i in range(len(columns))]
    for c, array in zip(columns, arrays, strict=True):
        if array.type != c.arrow_type or any(doubtful(d) for d in doubles_of(c, array)):
            return None
    return arrays


def parsed_field(field: pa.Field, values: Sequence[bytes]) -> pa.Array | None:
    """One top-level field of every record of `values` (null where a record lacks it), read at once
    by Arrow's JSON reader, the other fields read but not kept; None when the reader refuses a
    record, or a value of the field is not of the field's type (not converted: a number is no
    string). What it reads otherwise than Python's reader is the caller's to rule out: each
    record it keeps must also pass `parsed_columns` (tasks/json_batches.py)."""
    table = read_whole(pa.schema([field]), values, "ignore")
    if table is None or table.num_rows != len(values):
        return None
    return table.column(0).combine_chunks()


def read_whole(
    schema: pa.Schema, values: Sequence[bytes], unexpected: str, brackets: int | None = None
) -> pa.Table | None:
    """`values` read by Arrow's JSON reader as one text, a line each, with `schema` and, as
    `unexpected` says, no other field (error), others passed over (ignore) or read too (infer);
    None for values it must not be given or refuses, or (with `brackets`) one holding more
    brackets than that: nested maybe past what Python's reader reads (it counts those in strings
    too)."""
    if not values:
        return None
    raw = pa.array(values, pa.binary())
    # Objects only: a value of another kind (a null first crashes Arrow's reader), framed by
    # Confluent's serializer, or with a byte order mark is left to orjson.
    if not pc.all(pc.and_(pc.starts_with(raw, "{"), pc.ends_with(raw, "}"))).as_py():
        return None
    if brackets is not None:
        # Only a value longer than `brackets` bytes may hold more (counting costs a pass each).
        long = raw.filter(pc.greater(pc.binary_length(raw), brackets))
        counts = pc.add(pc.count_substring(long, "{"), pc.count_substring(long, "["))
        if len(long) and pc.max(counts).as_py() > brackets:
            return None
    try:
        raw.cast(pa.string())  # Arrow's reader takes invalid UTF-8 into a string; orjson refuses it
    except pa.ArrowInvalid:
        return None
    text = b"\n".join(values)
    if len(text) >= _MAX_BLOCK:
        return None
    # One search of the whole text (Arrow's per value costs a third of a parse), then the values.
    if (b"Inf" in text or b"NaN" in text) and _nonfinite_tokens(raw):
        return None
    try:
        return pa_json.read_json(
            pa.py_buffer(text),
            # One block: a record spanning lines (whitespace between its tokens) is read whole.
            read_options=pa_json.ReadOptions(use_threads=False, block_size=len(text) + 1),
            parse_options=pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior=unexpected),
        )
    except (pa.ArrowException, ValueError):
        return None


def _nonfinite_tokens(raw: pa.Array) -> bool:
    """Whether a value may hold a number spelled `Inf`, `-Inf`, `NaN` or `-NaN` (or `Infinity`):
    Arrow's reader takes the first and the last, which orjson and Python's reader refuse, and in a
    field no column holds (passed over or inferred) no check of the columns' doubles sees them."""
    suspects = raw.filter(pc.or_(pc.match_substring(raw, "Inf"), pc.match_substring(raw, "NaN")))
    return bool(len(suspects)) and bool(pc.any(pc.match_substring_regex(suspects, r"[:,\[]\s*-?(Inf|NaN)")).as_py())


def doubtful(doubles: pa.Array) -> bool:
    """Whether Arrow's reader may have read these doubles otherwise than Python's: it spells NaN and
    the infinities more ways, takes an integer a double does not hold exactly (which
    `checked_array` leaves to Spark), and reads the integer -0 as -0.0 (Python's reader and
    Spark's: 0.0)."""
    return bool(
        pc.any(pc.invert(pc.is_finite(doubles))).as_py()
        or pc.any(pc.greater_equal(pc.abs(doubles), _EXACT)).as_py()
        or pc.any(pc.and_(pc.equal(doubles, 0.0), pc.less(pc.divide(1.0, doubles), 0.0))).as_py()
    )
