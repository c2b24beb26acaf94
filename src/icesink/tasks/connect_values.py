"""Connect JSON payload values to Arrow, in the tasks (tasks/decode_connect.py), in two steps:

1. `read`: the values as JSON types, as a Connect schema's `Node` says (schema/connect.py): an
   integer as int64, a number as float64, base64 bytes as their text, a struct, an array, a map.
   A record at a time, from the payloads orjson parsed, their Python types checked strictly (bool
   is no int); a batch at a time, Arrow's JSON reader makes the same arrays (`read_type`:
   tasks/connect_batches.py).
2. `converted`: those arrays to their column types exactly as Spark's path converts them
   (batch/decode/connect_columns.py): Connect's Decimal from the base64 of its unscaled bytes,
   Connect's and Debezium's dates, times and timestamps (tasks/semantic_values.py), a required
   field's default for a null, structs laid out as the table's.

A value Spark's path would not read the same way raises DeclinedValueError (or Arrow's error).
Pure: no Spark session.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Sequence
from decimal import Context, Decimal, Inexact
from itertools import chain
from typing import Any

import numpy as np
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

from icesink.schema.connect import DECIMAL, Node
from icesink.tasks.decode_json import DeclinedValueError
from icesink.tasks.semantic_values import CONVERSIONS


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
_EXACT = Context(prec=100, traps=[Inexact])
FLOAT_EXACT = 1 << 24  # an integer beyond it may round twice when read as a double, then a float

# ---------------------------------------------------------------- 1. read: JSON values as Arrow


def _json_type(t: DataType) -> pa.DataType:
    """The Arrow type of the JSON values a value of parse type `t` is read from."""
    if isinstance(t, IntegerType | LongType):
        return pa.int64()
    if isinstance(t, DoubleType | FloatType):
        return pa.float64()
    if isinstance(t, BooleanType):
        return pa.bool_()
    if isinstance(t, StringType | BinaryType):
        return pa.string()  # bytes: their base64
    if isinstance(t, StructType):
        return pa.struct([pa.field(f.name, _json_type(f.dataType)) for f in t.fields])
    raise DeclinedValueError(f"a value of type {t.simpleString()}")


def is_struct(n: Node) -> bool:
    """Whether `n` is a Connect struct (of no fields, too: connect_rows.pruned may leave none)."""
    return n.logical is None and isinstance(n.parse, StructType)


def read_type(n: Node) -> pa.DataType:
    """The Arrow type `read` gives the values of Connect schema `n` (a map's: keys as strings)."""
    if is_struct(n):
        return pa.struct([pa.field(name, read_type(child)) for name, child in n.fields])
    if n.element is not None:
        element = read_type(n.element)
        return pa.map_(pa.string(), element) if isinstance(n.parse, MapType) else pa.list_(element)
    return _json_type(n.parse)


def _read_typed(t: DataType, values: Sequence[Any]) -> pa.Array:
    """Parsed JSON values of parse type `t` as `_json_type(t)`, their Python types checked."""
    if isinstance(t, IntegerType | LongType):
        _require(values, _INTS, "an integer")
        return pa.array(values, pa.int64())
    if isinstance(t, DoubleType):
        _require(values, _NUMBERS, "a number")
        return pa.array(values, pa.float64())
    if isinstance(t, FloatType):
        _require(values, _NUMBERS, "a number")
        if any(type(v) is int and abs(v) > FLOAT_EXACT for v in values):
            raise DeclinedValueError("an integer a float does not hold exactly")
        return pa.array(values, pa.float64())
    if isinstance(t, BooleanType):
        _require(values, _BOOLEANS, "a boolean")
        return pa.array(values, pa.bool_())
    if isinstance(t, StringType | BinaryType):
        _require(values, _STRINGS, "a string" if isinstance(t, StringType) else "base64 text")
        return pa.array(values, pa.string())
    if isinstance(t, StructType):
        _require(values, _DICTS, "an object")
        children = [_read_typed(f.dataType, _field(values, f.name)) for f in t.fields]
        return _struct_of([f.name for f in t.fields], children, values)
    raise DeclinedValueError(f"a value of type {t.simpleString()}")


def _field(objects: Sequence[dict[str, Any] | None], name: str) -> list[Any]:
    return [o.get(name) if o is not None else None for o in objects]


def _struct_of(names: Sequence[str], children: Sequence[pa.Array], values: Sequence[Any]) -> pa.Array:
    return pa.StructArray.from_arrays(
        children, fields=[pa.field(name, c.type) for name, c in zip(names, children, strict=True)],
        mask=pa.array([v is None for v in values], pa.bool_()),
    )  # fmt: skip


def read(n: Node, values: Sequence[Any]) -> pa.Array:
    """Payload values (as orjson parsed them) of Connect schema `n` as `read_type(n)`, raising
    DeclinedValueError for one of another JSON type."""
    if is_struct(n):
        _require(values, _DICTS, "an object")
        names = [name for name, _ in n.fields]
        children = [read(child, _field(values, name)) for name, child in n.fields]
        return _struct_of(names, children, values)
    if n.element is None:
        return _read_typed(n.parse, values)
    is_map = isinstance(n.parse, MapType)
    _require(values, _DICTS if is_map else _LISTS, "an object" if is_map else "an array")
    offsets = [0]
    for v in values:
        offsets.append(offsets[-1] + (len(v) if v is not None else 0))
    mask = pa.array([v is None for v in values], pa.bool_())
    present = [v for v in values if v is not None]
    if is_map:
        items = read(n.element, list(chain.from_iterable(v.values() for v in present)))
        keys = pa.array(list(chain.from_iterable(present)), pa.string())
        return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), keys, items, mask=mask)
    elements = read(n.element, list(chain.from_iterable(present)))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), elements, mask=mask)


# ---------------------------------------------------------------- 2. converted: to the columns


def _bytes(text: str) -> bytes:
    """Connect's base64 of bytes; only the canonical spelling (what JsonConverter writes), so
    that Spark's reader and this one cannot read it differently."""
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        raise DeclinedValueError("bytes that are not base64") from None
    if binascii.b2a_base64(raw, newline=False) != text.encode("ascii"):
        raise DeclinedValueError("bytes in a base64 spelling JsonConverter does not write")
    return raw


def _finite(array: pa.Array) -> pa.Array:
    if pc.any(pc.invert(pc.is_finite(array))).as_py():
        raise DeclinedValueError("a float that is not finite")
    return array


def _float32(doubles: pa.Array) -> pa.Array:
    """Numbers read as doubles as float32, where that cannot round them otherwise than Spark
    (reading the JSON text as a float) does: a double exactly halfway between two floats is
    declined (an integer beyond 2**24 was, when read)."""
    x = _finite(doubles).fill_null(0.0).to_numpy(zero_copy_only=False)
    with np.errstate(over="ignore"):
        near = x.astype(np.float32)
        other = np.nextafter(near, np.where(x > near, np.float32(np.inf), np.float32(-np.inf)))
    if np.any((near.astype(np.float64) + other.astype(np.float64)) / 2 == x):
        raise DeclinedValueError("a double halfway between two floats")
    return _finite(doubles.cast(pa.float32()))


def _typed(t: DataType, array: pa.Array) -> pa.Array:
    """JSON values read (`_json_type(t)`) as from_json reads them with type `t` (a primitive, or a
    struct of them: a VariableScaleDecimal), raising DeclinedValueError (or Arrow's error) for
    one it would not read."""
    if isinstance(t, IntegerType):
        return array.cast(pa.int32())  # safe: out of range raises
    if isinstance(t, DoubleType):
        return _finite(array)
    if isinstance(t, FloatType):
        return _float32(array)
    if isinstance(t, BinaryType):
        return pa.array([None if v is None else _bytes(v) for v in array.to_pylist()], pa.binary())
    if isinstance(t, StructType):
        children = [_typed(f.dataType, c) for f, c in zip(t.fields, array.flatten(), strict=True)]
        return pa.StructArray.from_arrays(
            children, fields=[pa.field(f.name, c.type) for f, c in zip(t.fields, children, strict=True)],
            mask=array.is_null(),
        )  # fmt: skip
    return array


def _decimal(texts: pa.Array, n: Node) -> pa.Array:
    """Connect's Decimal (the base64 of its two's-complement big-endian unscaled bytes) as
    `n.result`, exactly: a value with more digits than its precision is declined (Spark's path: a
    dead letter)."""
    target = n.result
    assert isinstance(target, DecimalType)
    unscaled: list[int] = []
    for text in texts.to_pylist():
        b = _bytes(text) if text is not None else b"\x00"
        if not b:
            raise DeclinedValueError("a Decimal without bytes")
        unscaled.append(int.from_bytes(b, "big", signed=True))
    bound = 10**target.precision
    if unscaled and max(max(unscaled), -min(unscaled)) >= bound:
        raise DeclinedValueError(f"a Decimal beyond decimal({target.precision}, {target.scale})")
    arrow = pa.decimal128(target.precision, target.scale)
    if bound > 1 << 63:  # beyond int64: a Decimal each, exact (the default context rounds to 28 digits)
        nulls = texts.is_null().to_pylist()
        exact = [None if null else Decimal(u).scaleb(-n.scale, _EXACT) for u, null in zip(unscaled, nulls, strict=True)]
        return pa.array(exact, arrow)
    # decimal128's layout: 16 bytes of the unscaled value, little-endian two's complement.
    low = np.array(unscaled, np.int64)
    words = np.stack([low, low >> 63], axis=1)
    found = pa.Array.from_buffers(arrow, len(texts), [None, pa.py_buffer(words.tobytes())])
    return pc.if_else(texts.is_valid(), found, pa.scalar(None, arrow)) if texts.null_count else found


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


def converted(n: Node, array: pa.Array, target: DataType) -> pa.Array:
    """The values of Connect schema `n`, as `read` reads them (`read_type(n)`), as a column of the
    table's type `target` (which `n.result` fits): converted, defaults applied, structs laid out
    as the table's (a field the schema lacks is null)."""
    if n.default is not None and array.null_count:
        array = pc.coalesce(array, read(n, [n.default])[0])
    if n.logical == DECIMAL:
        out = _decimal(array, n)  # its base64 decoded there, with the value
    elif n.logical is not None:
        out = _LOGICAL[n.logical](_typed(n.parse, array))
    elif is_struct(n):
        assert isinstance(target, StructType)
        return _struct(n, array, target)
    elif n.element is not None:
        return _nested(n, array, target)
    else:
        out = _typed(n.parse, array)
    arrow = to_arrow_type(target)
    return out if out.type == arrow else out.cast(arrow, safe=True)


def _struct(n: Node, array: pa.Array, target: StructType) -> pa.Array:
    by_name = dict(n.fields)
    read_fields = dict(zip((f.name for f in array.type), array.flatten(), strict=True))
    children = []
    for f in target.fields:
        child = by_name.get(f.name)
        if child is None:
            children.append(pa.nulls(len(array), to_arrow_type(f.dataType)))
        else:
            children.append(converted(child, read_fields[f.name], f.dataType))
    return pa.StructArray.from_arrays(
        children, fields=[pa.field(f.name, c.type) for f, c in zip(target.fields, children, strict=True)],
        mask=array.is_null(),
    )  # fmt: skip


def _nested(n: Node, array: pa.Array, target: DataType) -> pa.Array:
    """An array's or a string-keyed map's values."""
    assert n.element is not None
    if isinstance(target, MapType):
        assert isinstance(array, pa.MapArray)
        # `read` leaves a null map no entries (Arrow has no flatten of a map that skips them).
        if array.offset or len(array.keys) != array.offsets[-1].as_py():
            raise DeclinedValueError("a map laid out otherwise than read lays it out")
        items = converted(n.element, array.items, target.valueType)
        return pa.MapArray.from_arrays(array.offsets, array.keys, items, mask=array.is_null())
    assert isinstance(target, ArrayType)
    lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy(zero_copy_only=False)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int32())
    elements = converted(n.element, array.flatten(), target.elementType)
    return pa.ListArray.from_arrays(offsets, elements, mask=array.is_null())
