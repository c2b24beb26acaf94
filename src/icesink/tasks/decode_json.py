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

Debezium change events without Connect schemas (JsonConverter with schemas off) are plain JSON
too (`PlainEnvelope`): the row is the event's image (`after`, `before` for a delete) with the
operation and source columns, as schema/envelope.py says; both images are checked against the
table's columns, and an event Spark's path would make a dead letter (no op, another op, no image)
declines. Plain JSON record keys (`decode.key_format: json`) fill the key column's struct
(`DirectRows`' `key`).
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

from icesink.schema.envelope import OPS, SOURCE_PREFIX, EnvelopeSpec

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


@dataclass(frozen=True)
class PlainEnvelope:
    """A table's share of the direct job when its records are Debezium change events in plain
    JSON: the table's columns (`direct_columns`) and the envelope's; pickled into the tasks."""

    columns: tuple[DirectColumn, ...]
    envelope: EnvelopeSpec


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


_DICTS = frozenset({dict, type(None)})


def _check(column: DirectColumn, values: Sequence[Any]) -> None:
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
        _check(f, [v.get(f.name) for v in objects])


def _doubles(column: DirectColumn, array: pa.Array) -> list[pa.Array]:
    """The double columns of `array` (of `column`), at any depth, flattened."""
    flat = array.flatten() if column.array else array
    if column.kind == "double":
        return [flat]
    if column.kind != "struct":
        return []
    return [d for i, f in enumerate(column.fields) for d in _doubles(f, flat.field(i))]


def _array(column: DirectColumn, values: Sequence[Any]) -> pa.Array:
    """One column of rows as Arrow, checked a column at a time."""
    _check(column, values)
    array = pa.array(values, column.arrow_type)
    # Infinity (or 1e999) is left to Spark; NaN is taken, as Spark takes it.
    for doubles in _doubles(column, array):
        if pc.any(pc.is_inf(doubles)).as_py():
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


# The column of a table of changes' rows saying which are tombstones (deletes of their record key).
TOMBSTONE = "__icesink_tombstone"


class DirectRows:
    """One table's rows, from the records `add` takes, as Arrow columns (`take`). With `carry`,
    each row keeps the Kafka coordinates `add` was given and whether it is a tombstone (a table of
    changes orders by them). With `key_column`, that column holds the record key: as a string
    (`decode.key_format: string`), or with `key` (a plain JSON record key's struct column) as the
    struct of its JSON object, and a key column of the table's (`keys`) that a row lacks takes the
    record key's field of that name, as Spark's path fills it (changes.classify). With `carry`, a
    record without a value is then a tombstone: a row of only its key. With `envelope`, each
    record is a Debezium change event (`PlainEnvelope`)."""

    def __init__(
        self, columns: Sequence[DirectColumn], carry: bool = False, key_column: str | None = None,
        envelope: EnvelopeSpec | None = None, key: DirectColumn | None = None, keys: Sequence[str] = (),
    ) -> None:  # fmt: skip
        self._columns = tuple(columns)
        self._names = frozenset(c.name for c in columns)
        self._order = tuple(c.name for c in columns)
        self._rows: list[tuple[Any, ...]] = []
        self._carry = carry
        self._coordinates: list[tuple[str, int, int]] = []
        self._key_column = key_column
        self._keys: list[bytes | None] = []
        self._tombstones: list[bool] = []
        self._nothing = tuple(None for _ in columns)
        self._key = key
        fields = {f.name for f in key.fields} if key is not None else set()
        self._from_key = [k for k in keys if k != key_column and k in fields and k in self._names]
        self._envelope = envelope
        if envelope is not None:
            synthetic = envelope.synthetic()
            self._image = self._names - synthetic - {key_column}
            self._sources = [
                (n, n[len(SOURCE_PREFIX) :]) for n in self._order if n in synthetic and n.startswith(SOURCE_PREFIX)
            ]
            self._other_images: list[dict[str, Any]] = []  # the images the rows do not take, checked too

    @property
    def rows(self) -> int:
        return len(self._rows)

    def add(
        self, value: bytes | None, coordinates: tuple[str, int, int] | None = None, key: bytes | None = None
    ) -> bool:  # fmt: skip
        """Takes the record's row (and, with `carry`, its topic, partition and offset; with
        `key_column`, its key); False (and nothing taken) when the record is not a JSON object of
        the table's columns (or a change event of them), nor a tombstone this table takes. Its
        values' types are checked by `take`."""
        if value is None and self._carry and self._key_column is not None:
            self._rows.append(self._nothing)
            tombstone = True
        else:
            found = json_object(value)
            if found is not None and self._envelope is not None:
                found = self._change(found, self._envelope)
            if found is None or not self._names.issuperset(found):
                return False
            get = found.get
            self._rows.append(tuple([get(n) for n in self._order]))
            tombstone = False
        if self._carry:
            assert coordinates is not None
            self._coordinates.append(coordinates)
            self._tombstones.append(tombstone)
        if self._key_column is not None:
            self._keys.append(key)
        return True

    def _change(self, event: dict[str, Any], envelope: EnvelopeSpec) -> dict[str, Any] | None:
        """The row of a change event (the image, the operation and source columns), or None when
        Spark's path would not make that row: no op Debezium writes, no image, an image or source
        that is not an object, an image field the table lacks (either image)."""
        op = event.get("op")
        code = OPS.get(op) if type(op) is str else None
        image, other = (
            (event.get("before"), event.get("after")) if op == "d" else (event.get("after"), event.get("before"))
        )
        source = event.get("source")
        if code is None or type(image) is not dict or not self._image.issuperset(image):
            return None
        if (other is not None and (type(other) is not dict or not self._image.issuperset(other))) or (
            source is not None and type(source) is not dict
        ):
            return None
        if other:
            self._other_images.append(other)
        row = {**image, envelope.operation_column: code}
        if source:
            row.update((column, source.get(name)) for column, name in self._sources)
        return row

    def take(self) -> pa.RecordBatch | None:
        """The rows taken since the last call as one Arrow batch (None if there are none); raises
        `DeclinedValueError` for a value not of its column's type (a record key not a JSON object
        of the key column's fields), and Arrow's error for one Arrow refuses (a key that is not
        UTF-8 too)."""
        if not self._rows:
            return None
        rows, self._rows = self._rows, []
        arrays = [_array(c, v) for c, v in zip(self._columns, zip(*rows, strict=True), strict=True)]
        if self._envelope is not None:
            others, self._other_images = self._other_images, []
            for c in self._columns:
                if c.name in self._image and others:
                    _check(c, [o.get(c.name) for o in others])
        keys: Sequence[bytes | None] | pa.Array
        keys, self._keys = self._keys, []
        if self._key is not None:
            keys = _key_structs(self._key, keys)
            for name in self._from_key:
                at = self._order.index(name)
                arrays[at] = pc.coalesce(arrays[at], pc.struct_field(keys, name).cast(arrays[at].type))
        coordinates, self._coordinates = self._coordinates, []
        tombstones, self._tombstones = self._tombstones, []
        carried = coordinates if self._carry else None
        return carried_columns(arrays, list(self._order), self._key_column, keys, carried, tombstones)


def _key_structs(column: DirectColumn, keys: Sequence[bytes | None]) -> pa.Array:
    """Plain JSON record keys as the key column's structs (null for a null key), as Spark's path
    parses them with the column's type; DeclinedValueError for a key that is not a JSON object of
    the column's fields, each of its type (Spark's path: a key error or a wider key column)."""
    objects = [json_object(k) if k is not None else None for k in keys]
    if any(o is None and k is not None for o, k in zip(objects, keys, strict=True)):
        raise DeclinedValueError(column.name)
    return _array(column, objects)


def carried_columns(
    arrays: list[pa.Array], names: list[str], key_column: str | None, keys: Sequence[bytes | None] | pa.Array,
    coordinates: Sequence[tuple[str, int, int]] | None, tombstones: Sequence[bool],
) -> pa.RecordBatch:  # fmt: skip
    """A table's decoded columns with what a JSON decoder carries beside them: the record key in
    `key_column` (as a string, or as decoded already), and with `coordinates` each row's topic,
    partition and offset and whether it is a tombstone before the table's columns (a table of
    changes orders by them)."""
    if key_column is not None:
        # Spark's path casts the key bytes to a string; UTF-8 that does not decode is left to it.
        decoded = keys if isinstance(keys, pa.Array) else pa.array(keys, pa.binary()).cast(pa.string())
        arrays[names.index(key_column)] = decoded
    if coordinates is not None:
        topics, partitions, offsets = zip(*coordinates, strict=True)
        carried = [
            pa.array(topics, pa.string()),
            pa.array(partitions, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array(tombstones, pa.bool_()),
        ]
        arrays, names = [*carried, *arrays], ["topic", "partition", "offset", TOMBSTONE, *names]
    return pa.RecordBatch.from_arrays(arrays, names=names)
