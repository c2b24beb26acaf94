"""Kafka Connect JSON records (JsonConverter with schemas on: `{"schema": S, "payload": P}`, the
default of a Debezium connector) straight to Arrow columns, in the tasks, for the one-pass write.

Each record's own Connect schema says what its payload holds (schema/connect.py reads it, for
Spark's path too): a task parses each distinct schema once, and takes its records only when its
row fits the table as it is (every field a column of the table, of a type the column holds:
`schema.evolution.fits`), so nothing here evolves a table. The values convert as Spark's path
converts them (batch/decode/connect_columns.py): Connect's Decimal from the base64 of its unscaled
bytes exactly, Connect's and Debezium's dates, times and timestamps (tasks/semantic_values.py), a
required field's default for a null. A Debezium envelope becomes its row as for Avro
(schema/envelope.py): the image, the operation column, the `_source_<name>` columns.

As tasks/decode_json.py, a record that is not beyond doubt the row Spark's path would make (not
Connect JSON, a schema that does not fit, a value not of its schema's type, a decimal that does
not fit, an event without an image) declines its table's records, which then take Spark's path
(new columns, dead letters). Pure: no Spark session.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from itertools import chain
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
)

from icesink.schema.connect import DECIMAL, ConnectSchemaError, Node, parse_schema
from icesink.schema.envelope import SOURCE_PREFIX, EnvelopeError, EnvelopeSpec, row_type
from icesink.schema.evolution import fits
from icesink.tasks.decode_json import DeclinedValueError, carried_columns, json_object
from icesink.tasks.envelope_rows import OPS
from icesink.tasks.semantic_values import CONVERSIONS


@dataclass(frozen=True)
class DirectConnect:
    """A table's share of the direct job when its records are Connect JSON: the table's columns
    (Spark's types, for the schemas' check) and its Debezium envelope, if its records are change
    events; pickled into the tasks."""

    table: StructType
    envelope: EnvelopeSpec | None = None


# ---------------------------------------------------------------- values


def _require(values: Sequence[Any], kinds: frozenset[type], what: str) -> None:
    # set(map(type, ...)) runs in C (see decode_json._check); bool is not an int here.
    if not set(map(type, values)) <= kinds:
        raise DeclinedValueError(f"a value that is not {what}")


_NONE: type = type(None)
_INTS: frozenset[type] = frozenset({int, _NONE})
_NUMBERS: frozenset[type] = frozenset({int, float, _NONE})
_BOOLEANS: frozenset[type] = frozenset({bool, _NONE})
_STRINGS: frozenset[type] = frozenset({str, _NONE})
_DICTS: frozenset[type] = frozenset({dict, _NONE})
_LISTS: frozenset[type] = frozenset({list, _NONE})


def _bytes(text: str) -> bytes:
    """Connect's base64 of bytes; only the canonical spelling (what JsonConverter writes), so
    that Spark's reader and this one cannot read it differently."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise DeclinedValueError("bytes that are not base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise DeclinedValueError("bytes in a base64 spelling JsonConverter does not write")
    return raw


def _finite(array: pa.Array) -> pa.Array:
    if pc.any(pc.invert(pc.is_finite(array))).as_py():
        raise DeclinedValueError("a float that is not finite")
    return array


def _float32(values: Sequence[Any]) -> pa.Array:
    """Numbers as float32, where reading the JSON text as a double first cannot round them
    otherwise than Spark (reading it as a float) does: an integer beyond 2**24, or a double
    exactly halfway between two floats, is declined."""
    if any(type(v) is int and abs(v) > 1 << 24 for v in values):
        raise DeclinedValueError("an integer a float does not hold exactly")
    doubles = _finite(pa.array(values, pa.float64()))
    x = doubles.fill_null(0.0).to_numpy(zero_copy_only=False)
    with np.errstate(over="ignore"):
        near = x.astype(np.float32)
        other = np.nextafter(near, np.where(x > near, np.float32(np.inf), np.float32(-np.inf)))
    if np.any((near.astype(np.float64) + other.astype(np.float64)) / 2 == x):
        raise DeclinedValueError("a double halfway between two floats")
    return _finite(doubles.cast(pa.float32()))


def _parsed(t: DataType, values: Sequence[Any]) -> pa.Array:
    """Payload values as from_json reads them with type `t` (a primitive, or a struct of them: a
    VariableScaleDecimal), raising DeclinedValueError (or Arrow's error) for one it would not."""
    if isinstance(t, IntegerType | LongType):
        _require(values, _INTS, "an integer")
        return pa.array(values, pa.int32() if isinstance(t, IntegerType) else pa.int64())
    if isinstance(t, DoubleType):
        _require(values, _NUMBERS, "a number")
        return _finite(pa.array(values, pa.float64()))
    if isinstance(t, FloatType):
        _require(values, _NUMBERS, "a number")
        return _float32(values)
    if isinstance(t, BooleanType):
        _require(values, _BOOLEANS, "a boolean")
        return pa.array(values, pa.bool_())
    if isinstance(t, StringType):
        _require(values, _STRINGS, "a string")
        return pa.array(values, pa.string())
    if isinstance(t, BinaryType):
        _require(values, _STRINGS, "base64 text")
        return pa.array([None if v is None else _bytes(v) for v in values], pa.binary())
    if isinstance(t, StructType):
        _require(values, _DICTS, "an object")
        children = [_parsed(f.dataType, [v.get(f.name) if v is not None else None for v in values]) for f in t.fields]
        return pa.StructArray.from_arrays(
            children, fields=[pa.field(f.name, c.type) for f, c in zip(t.fields, children, strict=True)],
            mask=pa.array([v is None for v in values], pa.bool_()),
        )  # fmt: skip
    raise DeclinedValueError(f"a value of type {t.simpleString()}")


def _decimal(raw: pa.Array, n: Node) -> pa.Array:
    """Connect's Decimal (two's-complement big-endian unscaled bytes) as `n.result`, exactly: a
    value with more digits than its precision is declined (Spark's path: a dead letter)."""
    target = n.result
    assert isinstance(target, DecimalType)
    bound = 10**target.precision
    out: list[Decimal | None] = []
    for b in raw.to_pylist():
        if b is None:
            out.append(None)
            continue
        if not b:
            raise DeclinedValueError("a Decimal without bytes")
        unscaled = int.from_bytes(b, "big", signed=True)
        if abs(unscaled) >= bound:
            raise DeclinedValueError(f"a Decimal beyond decimal({target.precision}, {target.scale})")
        out.append(Decimal(unscaled).scaleb(-n.scale))
    return pa.array(out, pa.decimal128(target.precision, target.scale))


def _nano_time(a: pa.Array) -> pa.Array:
    # Spark's path divides as a double: exact below 2**53 (a time of day in nanoseconds is).
    if pc.any(pc.greater(pc.abs(a), 1 << 53)).as_py():
        raise DeclinedValueError("a NanoTime beyond 2**53")
    floor = pc.divide(a, 1000)  # integer division truncates toward zero
    below = pc.and_(pc.less(a, 0), pc.not_equal(pc.multiply(floor, 1000), a))
    return pc.subtract(floor, pc.cast(below, pa.int64()))


_LOGICAL: dict[str, Callable[[pa.Array], pa.Array]] = {
    "org.apache.kafka.connect.data.Date": lambda a: a.view(pa.date32()),
    "org.apache.kafka.connect.data.Time": lambda a: pc.multiply_checked(a.cast(pa.int64()), 1000),
    "org.apache.kafka.connect.data.Timestamp": lambda a: pc.multiply_checked(a, 1000).cast(pa.timestamp("us", "UTC")),
    "io.debezium.time.NanoTime": _nano_time,
    **CONVERSIONS,
}


def converted(n: Node, values: Sequence[Any], target: DataType) -> pa.Array:
    """The payload values of Connect schema `n` as a column of the table's type `target` (which
    `n.result` fits): converted, defaults applied, structs laid out as the table's (a field the
    schema lacks is null)."""
    if n.default is not None:
        values = [n.default if v is None else v for v in values]
    if n.logical == DECIMAL:
        out = _decimal(_parsed(n.parse, values), n)
    elif n.logical is not None:
        out = _LOGICAL[n.logical](_parsed(n.parse, values))
    elif n.fields:
        assert isinstance(target, StructType)
        return _struct(n, values, target)
    elif n.element is not None:
        return _nested(n, values, target)
    else:
        out = _parsed(n.parse, values)
    arrow = to_arrow_type(target)
    return out if out.type == arrow else out.cast(arrow, safe=True)


def _struct(n: Node, values: Sequence[Any], target: StructType) -> pa.Array:
    _require(values, _DICTS, "an object")
    by_name = dict(n.fields)
    children = []
    for f in target.fields:
        child = by_name.get(f.name)
        if child is None:
            children.append(pa.nulls(len(values), to_arrow_type(f.dataType)))
        else:
            children.append(converted(child, [v.get(f.name) if v is not None else None for v in values], f.dataType))
    return pa.StructArray.from_arrays(
        children, fields=[pa.field(f.name, c.type) for f, c in zip(target.fields, children, strict=True)],
        mask=pa.array([v is None for v in values], pa.bool_()),
    )  # fmt: skip


def _nested(n: Node, values: Sequence[Any], target: DataType) -> pa.Array:
    """An array's or a string-keyed map's values."""
    assert n.element is not None
    is_map = isinstance(n.parse, MapType)
    _require(values, _DICTS if is_map else _LISTS, "an object" if is_map else "an array")
    offsets = [0]
    for v in values:
        offsets.append(offsets[-1] + (len(v) if v is not None else 0))
    mask = pa.array([v is None for v in values], pa.bool_())
    present = [v for v in values if v is not None]
    if isinstance(target, MapType):
        items = converted(n.element, list(chain.from_iterable(v.values() for v in present)), target.valueType)
        keys = pa.array(list(chain.from_iterable(present)), pa.string())
        return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), keys, items, mask=mask)
    assert isinstance(target, ArrayType)
    elements = converted(n.element, list(chain.from_iterable(present)), target.elementType)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), elements, mask=mask)


# ---------------------------------------------------------------- a schema's rows


class _Reader:
    """The rows of one Connect schema's payloads in the table's columns."""

    def __init__(self, root: Node, table: StructType, envelope: EnvelopeSpec | None) -> None:
        self._fields = dict(root.fields)
        self._table = table
        self._envelope = envelope

    def columns(self, payloads: Sequence[dict[str, Any]]) -> list[pa.Array]:
        if self._envelope is None:
            return [self._column(self._fields, payloads, f.name, f.dataType, f.name) for f in self._table.fields]
        return self._changes(payloads, self._envelope)

    @staticmethod
    def _column(fields: dict[str, Node], objects: Sequence[Any], name: str, target: DataType, key: str) -> pa.Array:
        found = fields.get(key)
        if found is None:
            return pa.nulls(len(objects), to_arrow_type(target))
        return converted(found, [o.get(key) if o is not None else None for o in objects], target)

    def _changes(self, payloads: Sequence[dict[str, Any]], envelope: EnvelopeSpec) -> list[pa.Array]:
        """A Debezium envelope's rows (schema/envelope.py row_type): the image (`before` for a
        delete), the operation, the source fields."""
        ops = [p.get("op") for p in payloads]
        codes = [OPS.get(op) if type(op) is str else None for op in ops]
        if None in codes:
            raise DeclinedValueError("a change event without an op Debezium writes")
        images = [p.get("before") if op == "d" else p.get("after") for p, op in zip(payloads, ops, strict=True)]
        if not set(map(type, images)) <= {dict}:
            raise DeclinedValueError("a change event without its row image")
        source = self._fields.get("source")
        source_fields = dict(source.fields) if source is not None else {}
        sources = [p.get("source") for p in payloads]
        _require(sources, _DICTS, "an object")
        image = self._fields.get("after") or self._fields["before"]
        image_fields = dict(image.fields)
        out = []
        for f in self._table.fields:
            name = f.name[len(SOURCE_PREFIX) :] if f.name.startswith(SOURCE_PREFIX) else None
            if f.name == envelope.operation_column:
                out.append(pa.array(codes, pa.string()))
            elif name is not None and name in source_fields:
                out.append(self._column(source_fields, sources, f.name, f.dataType, name))
            else:
                out.append(self._column(image_fields, images, f.name, f.dataType, f.name))
        return out


def reader(text: bytes, decoder: DirectConnect) -> _Reader | None:
    """The reader of the records of Connect schema `text`, or None when its rows do not fit the
    table as it is (a new field, a wider or another type: Spark's path evolves the table or makes
    them dead letters), or it is not a schema Spark's path reads."""
    try:
        schema = parse_schema(text.decode("utf-8"))
        row = schema.result_type if decoder.envelope is None else row_type(schema.result_type, decoder.envelope)
    except (ConnectSchemaError, EnvelopeError, UnicodeDecodeError):
        return None
    table = {f.name: f.dataType for f in decoder.table.fields}
    if not all(f.name in table and fits(f.dataType, table[f.name]) for f in row.fields):
        return None
    if decoder.envelope is not None:
        parts = dict(schema.root.fields)
        if not isinstance(parts["op"].result, StringType):
            return None
        before, after = parts.get("before"), parts.get("after")
        if before is not None and after is not None and before.result != after.result:
            return None  # Debezium's are one schema; two would each need their own columns
    return _Reader(schema.root, decoder.table, decoder.envelope)


class ConnectRows:
    """One table's rows from Connect JSON records, as tasks/decode_json.DirectRows takes plain
    JSON ones (`add` a record at a time, `take` the rows as Arrow), with the same `carry` and
    `key_column`."""

    def __init__(self, decoder: DirectConnect, carry: bool = False, key_column: str | None = None) -> None:
        self._decoder = decoder
        self._readers: dict[bytes, _Reader | None] = {}
        self._payloads: list[tuple[_Reader | None, dict[str, Any] | None]] = []
        self._carry = carry
        self._key_column = key_column
        self._coordinates: list[tuple[str, int, int]] = []
        self._keys: list[bytes | None] = []

    @property
    def rows(self) -> int:
        return len(self._payloads)

    def add(
        self, value: bytes | None, coordinates: tuple[str, int, int] | None = None, key: bytes | None = None
    ) -> bool:  # fmt: skip
        """Takes the record (see DirectRows.add); False when it is not Connect JSON with a
        schema whose rows fit the table."""
        if value is None and self._carry and self._key_column is not None:
            self._payloads.append((None, None))  # a tombstone
        else:
            found = json_object(value)
            if found is None:
                return False
            schema, payload = found.get("schema"), found.get("payload")
            if type(schema) is not dict or type(payload) is not dict:
                return False
            text = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
            if text not in self._readers:
                self._readers[text] = reader(text, self._decoder)
            read = self._readers[text]
            if read is None:
                return False
            self._payloads.append((read, payload))
        if self._carry:
            assert coordinates is not None
            self._coordinates.append(coordinates)
        if self._key_column is not None:
            self._keys.append(key)
        return True

    def take(self) -> pa.RecordBatch | None:
        """The rows taken since the last call (see DirectRows.take)."""
        if not self._payloads:
            return None
        payloads, self._payloads = self._payloads, []
        table = self._decoder.table
        groups: dict[int, tuple[_Reader | None, list[int]]] = {}
        for i, (read, _) in enumerate(payloads):
            groups.setdefault(id(read), (read, []))[1].append(i)
        parts = []
        for read, at in groups.values():
            if read is None:  # tombstones: a row of nulls (the key column is set from the key after)
                arrays = [pa.nulls(len(at), to_arrow_type(f.dataType)) for f in table.fields]
            else:
                arrays = read.columns([payloads[i][1] for i in at])  # type: ignore[misc]
            parts.append(pa.Table.from_arrays([pa.array(at, pa.int64()), *arrays], names=["i", *table.names]))
        rows = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        if len(parts) > 1:
            rows = rows.take(pc.sort_indices(rows.column("i")))
        arrays = [c.combine_chunks() for c in rows.columns[1:]]
        coordinates, self._coordinates = self._coordinates, []
        keys, self._keys = self._keys, []
        tombstones = [read is None for read, _ in payloads]
        carried = coordinates if self._carry else None
        return carried_columns(arrays, list(table.names), self._key_column, keys, carried, tombstones)
