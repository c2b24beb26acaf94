"""Debezium's semantic types (`connect.name` on an Avro type) converted in Arrow, in the tasks: the
same values Spark's path makes (batch/decode/semantic.py, whose CONVERSIONS this has a function
for each of, pinned in tests/spark/test_semantic_values.py). A ZonedTimestamp's text and a
VariableScaleDecimal's bytes are converted a whole array at a time where Arrow reads them as
Python reads one value (pinned in tests/unit/test_semantic_values.py), else a value at a time.

A value Spark's path would not convert exactly (a VariableScaleDecimal beyond decimal(38, 18) or
of more than 38 digits, a ZonedTimestamp it does not parse, a timestamp out of range) is not
guessed at: it raises DeclinedValueError, and the table's records take Spark's path, which makes
it a dead letter.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from decimal import Context, Decimal, Inexact
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icesink.tasks.decode_json import DeclinedValueError

Path = tuple[str, ...]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# What Debezium writes for a timestamptz; another spelling is left to Spark's parser.
_ZONED = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})")
_ZONED_ASCII = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$"
_DECIMAL_SCALE = 18
_DECIMAL_TYPE = pa.decimal128(38, _DECIMAL_SCALE)
_DECIMAL_BOUND = Decimal(10) ** (38 - _DECIMAL_SCALE)
# Spark's path reads a VariableScaleDecimal's digits into a decimal(38, 0) first: more is a dead letter.
_UNSCALED_BOUND = 10**38
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
    strings = _plain(strings)
    whole = _zoned_whole(strings)
    return whole if whole is not None else _zoned_each(strings)


def _zoned_whole(strings: pa.Array) -> pa.Array | None:
    """Every ZonedTimestamp parsed at once by Arrow's ISO 8601 reader, where each is spelled as
    Debezium writes it in ASCII digits and after year 0000: there Arrow reads what Python's
    `fromisoformat` reads, and refuses what it refuses (a day, hour or offset out of range). None
    where one is not so spelled, or Arrow refuses one: `_zoned_each` decides each value."""
    if not pc.all(pc.match_substring_regex(strings, _ZONED_ASCII)).as_py():
        return None
    if pc.any(pc.starts_with(strings, "0000")).as_py():
        return None  # Python has no year 0
    try:
        return pc.cast(strings, pa.timestamp("us", "UTC"))
    except pa.ArrowInvalid:
        return None


def _zoned_each(strings: pa.Array) -> pa.Array:
    out: list[int | None] = []
    for s in strings.to_pylist():
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
    whole = _variable_decimals_whole(structs)
    return whole if whole is not None else _variable_decimals_each(structs)


def _variable_decimals_whole(structs: pa.Array) -> pa.Array | None:
    """Every VariableScaleDecimal at once: its bytes laid out as a 128-bit integer (sign-extended),
    read as decimal128(38, scale), bounded, and cast exactly to decimal(38, 18), which Arrow refuses
    where it would round. Only for 1 to 15 bytes (under 10**36, within 38 digits) and scales 0 to
    38; None otherwise, or where Arrow refuses one: `_variable_decimals_each` decides each value."""
    raw, scales = pc.struct_field(structs, "value"), pc.struct_field(structs, "scale")
    if pc.any(pc.and_(structs.is_valid(), pc.or_(raw.is_null(), scales.is_null()))).as_py():
        return None  # a struct without its bytes or scale
    length = pc.binary_length(raw)
    lengths = pc.fill_null(length, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    if not len(raw) or pc.any(pc.equal(length, 0)).as_py() or lengths.max() > 15:
        return None
    valid = raw.is_valid()
    found = pc.unique(pc.drop_null(scales)).to_pylist()
    if not all(0 <= scale <= 38 for scale in found):
        return None
    unscaled = _int128(raw, lengths)
    parts = []
    try:
        for scale in found:
            mine = pc.fill_null(pc.and_(valid, pc.equal(scales, scale)), False)
            decimals = pa.Array.from_buffers(pa.decimal128(38, scale), len(raw), [None, unscaled]).filter(mine)
            # Bounded first: Arrow's rescale overflows its 128 bits unchecked, then checks the result.
            wide = decimals.cast(pa.decimal256(76, scale))
            if pc.any(pc.greater_equal(pc.abs(wide), pa.scalar(_DECIMAL_BOUND, wide.type))).as_py():
                return None
            parts.append((mine, decimals.cast(_DECIMAL_TYPE, safe=True)))
    except pa.ArrowInvalid:
        return None
    if not parts:
        return pa.nulls(len(raw), _DECIMAL_TYPE)
    if len(parts) == 1 and pc.all(parts[0][0]).as_py():
        return parts[0][1]
    # Back in the rows' order, a null where the struct is.
    at = np.concatenate([np.flatnonzero(mine.to_numpy(zero_copy_only=False)) for mine, _ in parts])
    where = np.full(len(raw), -1, np.int64)
    where[at] = np.arange(len(at))
    return pa.concat_arrays([p for _, p in parts]).take(pa.array(where, mask=where < 0))


def _int128(raw: pa.Array, lengths: np.ndarray) -> pa.Buffer:
    """Big-endian two's-complement values (`lengths`: 1 to 16 bytes each, 0 for a null) as 16-byte
    little-endian integers, sign-extended, end to end."""
    n = len(raw)
    raw = raw.cast(pa.large_binary())
    offsets = np.frombuffer(raw.buffers()[1], np.int64)[raw.offset : raw.offset + n + 1]
    body = raw.buffers()[2]
    data = np.frombuffer(body, np.uint8) if body is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1]
    present = lengths > 0
    negative = np.zeros(n, bool)
    negative[present] = data[starts[present]] >= 0x80
    out = np.zeros((n, 16), np.uint8)
    out[negative] = 0xFF
    total = int(lengths.sum())
    rows = np.repeat(np.arange(n), lengths)
    within = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[rows, 16 - np.repeat(lengths, lengths) + within] = data[np.repeat(starts, lengths) + within]
    return pa.py_buffer(np.ascontiguousarray(out[:, ::-1]).tobytes())


def _variable_decimals_each(structs: pa.Array) -> pa.Array:
    out: list[Decimal | None] = []
    for v in structs.to_pylist():
        if v is None:
            out.append(None)
            continue
        raw = v["value"]
        if not raw:
            raise DeclinedValueError("a VariableScaleDecimal without bytes")
        unscaled = int.from_bytes(raw, "big", signed=True)
        if abs(unscaled) >= _UNSCALED_BOUND:
            raise DeclinedValueError("a VariableScaleDecimal of more than 38 digits")
        d = Decimal(unscaled).scaleb(-v["scale"], _EXACT)
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
