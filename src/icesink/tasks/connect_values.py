"""Connect JSON payload values to Arrow, in the tasks (tasks/decode_connect.py): parsed as a
Connect schema's `Node` says (schema/connect.py), converted to their column types exactly as
Spark's path converts them (batch/decode/connect_columns.py): Connect's Decimal from the base64 of
its unscaled bytes, Connect's and Debezium's dates, times and timestamps (tasks/semantic_values.py),
a required field's default for a null, structs laid out as the table's. A value Spark's path would
not read the same way raises DeclinedValueError (or Arrow's error). Pure: no Spark session.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from decimal import Decimal
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
