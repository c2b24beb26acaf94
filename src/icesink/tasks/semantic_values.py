"""Debezium's semantic types (`connect.name` on an Avro type) converted in Arrow, in the tasks: the
same values Spark's path makes (batch/decode/semantic.py, whose CONVERSIONS this has a function
for each of, pinned in tests/unit/test_semantic_values.py).

A value Spark's path would not convert exactly (a VariableScaleDecimal beyond decimal(38, 18), a
ZonedTimestamp it does not parse, a timestamp out of range) is not guessed at: it raises
DeclinedValueError, and the table's records take Spark's path, which makes it a dead letter.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from decimal import Context, Decimal, Inexact
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from icesink.tasks.decode_json import DeclinedValueError

Path = tuple[str, ...]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# What Debezium writes for a timestamptz; another spelling is left to Spark's parser.
_ZONED = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})")
_DECIMAL_SCALE = 18
_DECIMAL_TYPE = pa.decimal128(38, _DECIMAL_SCALE)
_DECIMAL_BOUND = Decimal(10) ** (38 - _DECIMAL_SCALE)
_EXACT = Context(prec=100, traps=[Inexact])


def _plain(array: pa.Array) -> pa.Array:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def _micros(array: pa.Array, factor: int) -> pa.Array:
    return pc.multiply_checked(_plain(array).cast(pa.int64()), factor).cast(pa.timestamp("us"))


def _floor_micros(nanos: pa.Array) -> pa.Array:
    """Nanoseconds to microseconds, rounded down (Spark's path floors too, exactly)."""
    nanos = _plain(nanos)
    truncated = pc.divide(nanos, 1000)  # integer division truncates toward zero
    below = pc.and_(pc.less(nanos, 0), pc.not_equal(pc.multiply(truncated, 1000), nanos))
    return pc.subtract(truncated, pc.cast(below, pa.int64())).cast(pa.timestamp("us"))


def _zoned(strings: pa.Array) -> pa.Array:
    out: list[int | None] = []
    for s in _plain(strings).to_pylist():
        if s is None:
            out.append(None)
            continue
        if not _ZONED.fullmatch(s):
            raise DeclinedValueError(f"a ZonedTimestamp spelled {s!r}")
        try:
            instant = dt.datetime.fromisoformat(s)
        except ValueError:
            raise DeclinedValueError(f"a ZonedTimestamp that does not parse: {s!r}") from None
        out.append((instant - _EPOCH) // dt.timedelta(microseconds=1))
    return pa.array(out, pa.int64()).cast(pa.timestamp("us", "UTC"))


def _variable_decimal(structs: pa.Array) -> pa.Array:
    """{scale, two's-complement bytes} -> decimal(38, 18), exactly, or declined."""
    structs = _plain(structs)
    out: list[Decimal | None] = []
    for v in structs.to_pylist():
        if v is None:
            out.append(None)
            continue
        raw = v["value"]
        if not raw:
            raise DeclinedValueError("a VariableScaleDecimal without bytes")
        d = Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-v["scale"], _EXACT)
        try:
            exact = d.quantize(Decimal(1).scaleb(-_DECIMAL_SCALE), context=_EXACT)
        except Inexact:
            raise DeclinedValueError("a VariableScaleDecimal that would round in decimal(38, 18)") from None
        if abs(exact) >= _DECIMAL_BOUND:
            raise DeclinedValueError("a VariableScaleDecimal beyond decimal(38, 18)")
        out.append(exact)
    return pa.array(out, _DECIMAL_TYPE)


CONVERSIONS: dict[str, Callable[[pa.Array], pa.Array]] = {
    "io.debezium.time.Date": lambda a: _plain(a).cast(pa.int32()).view(pa.date32()),
    "io.debezium.time.Timestamp": lambda a: _micros(a, 1000),
    "io.debezium.time.MicroTimestamp": lambda a: _micros(a, 1),
    "io.debezium.time.NanoTimestamp": _floor_micros,
    "io.debezium.time.ZonedTimestamp": _zoned,
    "io.debezium.time.Time": lambda a: pc.multiply_checked(_plain(a).cast(pa.int64()), 1000),
    "io.debezium.time.MicroTime": lambda a: _plain(a).cast(pa.int64()),
    "io.debezium.data.VariableScaleDecimal": _variable_decimal,
}


def converted(array: Any, path: Path, semantics: Mapping[Path, str]) -> pa.Array:
    """`array` (the decoded values at `path`) with the semantic values at or under `path` converted."""
    name = semantics.get(path)
    if name is not None:
        return CONVERSIONS[name](array)
    array = _plain(array)
    if not pa.types.is_struct(array.type) or not any(p[: len(path)] == path and p != path for p in semantics):
        return array
    children = [converted(array.field(i), (*path, f.name), semantics) for i, f in enumerate(array.type)]
    return pa.StructArray.from_arrays(
        children, fields=[pa.field(f.name, c.type) for f, c in zip(array.type, children, strict=True)],
        mask=pc.invert(array.is_valid()),
    )  # fmt: skip
