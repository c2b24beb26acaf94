"""The union check of the one-pass Avro decoder where the records need not be read again: each
field's encoded size is computed from the value polars decoded, so each union's index byte is found
where it is and compared with the branch polars read.

A value's computed size is its shortest encoding (a varint of the fewest bytes, a decimal's fewest
two's-complement bytes); a writer may encode one longer, never shorter, but for a zero decimal:
polars reads one of no byte (which Java refuses) as 0, as it reads one written in a byte. So when
a record has no zero decimal and its computed size is its body's length, every field is at the
place computed for it and each union index is one byte: the branch polars read, or an index Avro's
Java reader refuses (polars reads one as a branch). The other records (a zero decimal, a longer
encoding), and every record where the schema has arrays or maps (their blocks' counts are the
writer's choice), are read again (tasks/avro_unions.py), as every record was before: that took 0.1
s of 0.5 s for 150,000 Debezium events' decode, once per combination of null fields, where a table
of many nullable columns has hundreds.

Pure: Arrow and numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icesink.kafka import wire
from icesink.tasks.semantic_values import Path

_FIXED_SIZES = {"null": 0, "boolean": 1, "float": 4, "double": 8}
# Bounds of a varint's bytes: a zig-zag value below 2**(7 * k) takes k bytes at most.
_VARINT_BOUNDS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)
# Bounds of a two's-complement integer's bytes: a magnitude below 2**(8 * k - 1) takes k at most.
_BYTE_BOUNDS = [np.uint64(1 << (8 * k - 1)) for k in range(1, 8)]


class _NotJudgedError(Exception):
    """A type whose encoded size this module does not compute."""


def indexes_placed(
    fields: list[dict[str, Any]], unions: tuple[tuple[Path, int], ...], decoded: pa.Table, values: pa.Array
) -> tuple[bool, np.ndarray]:  # fmt: skip
    """(whether a union index of the records placed here is not the branch polars read, a mask of
    the records not placed here) for `values` (framed records, read by polars with the record
    schema `fields` into `decoded`, field for field). `unions`: (field path, the position of "null"
    in its union)."""
    n = len(values)
    everyone = np.ones(n, dtype=bool)
    if decoded.num_rows != n:
        return False, everyone
    walk = _Walk(dict(unions), n)
    try:
        walk.fields(fields, [_whole(decoded.column(f["name"])) for f in fields], everyone, ())
    except _NotJudgedError:
        return False, everyone
    lengths = pc.binary_length(values).to_numpy(zero_copy_only=False).astype(np.int64)
    placed = (walk.size + wire.HEADER_SIZE == lengths) & ~walk.zero
    width = 8 if pa.types.is_large_binary(values.type) else 4
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64 if width == 8 else np.int32)
    starts = offsets[values.offset : values.offset + n].astype(np.int64) + wire.HEADER_SIZE
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8)
    every = placed.all()
    for at, want, present in walk.indexes:
        # Only where a record is placed is each index inside it, where computed.
        where = present if every else present & placed
        if where.all():  # a union of every record (a record's first fields): no mask to apply
            found, wanted = data[starts + at], want
        else:
            found, wanted = data[(starts + at)[where]], want[where]
        if not np.array_equal(found, wanted):
            return True, ~placed
    return False, ~placed


def _whole(column: Any) -> pa.Array:
    if not isinstance(column, pa.ChunkedArray):
        return column
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


class _Walk:
    """The fields of a record in their order: each record's size so far, and where each union index is."""

    def __init__(self, null_at: dict[Path, int], n: int) -> None:
        self._null_at = null_at
        self.size = np.zeros(n, dtype=np.int64)  # each record's body bytes so far
        self.zero = np.zeros(n, dtype=bool)  # a zero decimal: of one byte, or of none (polars reads 0)
        # (each record's position of a union's index, the byte its branch is, where the union is)
        self.indexes: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def fields(self, fields: list[dict[str, Any]], arrays: list[pa.Array], present: np.ndarray, path: Path) -> None:
        for f, array in zip(fields, arrays, strict=True):
            self.value(f["type"], array, present, (*path, f["name"]))

    def value(self, t: Any, array: pa.Array, present: np.ndarray, at: Path) -> None:
        while isinstance(t, dict) and isinstance(t.get("type"), dict | list):
            t = t["type"]
        if isinstance(t, list):
            null_at = self._null_at.get(at)
            if null_at is None or len(t) != 2:
                raise _NotJudgedError
            valid = present & np.asarray(array.is_valid())
            branch = np.where(valid, 1 - null_at, null_at)
            self.indexes.append((self.size.copy(), (2 * branch).astype(np.uint8), present))
            self.size += present
            self.value(t[1 - null_at], array, valid, at)
            return
        kind = t.get("type") if isinstance(t, dict) else t
        if kind == "record":
            children = [array.field(f["name"]) for f in t["fields"]]
            self.fields(t["fields"], children, present, at)
            return
        if (kind, t.get("logicalType") if isinstance(t, dict) else None) == ("bytes", "decimal"):
            length = _decimal_bytes(array)
            self.zero |= present & (length == 0)
            sizes: np.ndarray | int = _varint_bytes(_zigzag(length)) + length
        else:
            sizes = _sizes(t, kind, array)
        self.size += sizes if present.all() else np.where(present, sizes, 0)


def _sizes(t: Any, kind: Any, array: pa.Array) -> np.ndarray | int:
    """The shortest encoding's bytes of each value of `array`, decoded from Avro type `t` (not a
    decimal on bytes: `_Walk.value`)."""
    if kind in _FIXED_SIZES:
        return _FIXED_SIZES[kind]
    if kind == "fixed":
        return int(t["size"])
    if kind in ("string", "bytes"):
        length = _filled(pc.binary_length(array)).astype(np.int64)
        sizes: np.ndarray = _varint_bytes(_zigzag(length)) + length
        return sizes
    if kind in ("int", "long"):
        return _varint_bytes(_zigzag(_integers(array)))
    raise _NotJudgedError  # an array or a map


def _integers(array: pa.Array) -> np.ndarray:
    """An int's or a long's values as polars read them (a date's days, a timestamp's units)."""
    kind = array.type
    if pa.types.is_timestamp(kind) or pa.types.is_time64(kind) or pa.types.is_date64(kind):
        array = array.view(pa.int64())
    elif pa.types.is_date32(kind) or pa.types.is_time32(kind):
        array = array.view(pa.int32())
    elif not pa.types.is_integer(kind):
        raise _NotJudgedError
    return _filled(array).astype(np.int64)


def _filled(array: pa.Array) -> np.ndarray:
    """The values as numpy, a null as 0 (its size is not counted: no value is encoded)."""
    out: np.ndarray = (array.fill_null(0) if array.null_count else array).to_numpy(zero_copy_only=False)
    return out


def _zigzag(v: np.ndarray) -> np.ndarray:
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def _varint_bytes(zigzag: np.ndarray) -> np.ndarray:
    """Each varint's bytes: one, and one more for each bound it reaches. Only the bounds below the
    greatest value are compared: lengths and small ints take one or two passes (searchsorted took
    3-16x as long: 0.8 ms for 150,000 values, of each of a Debezium event's ~47 fields)."""
    out = np.ones(len(zigzag), dtype=np.int64)
    top = int(zigzag.max()) if len(zigzag) else 0
    for bound in _VARINT_BOUNDS:
        if top < bound:
            break
        out += zigzag >= bound
    return out


def _decimal_bytes(array: pa.Array) -> np.ndarray:
    """The fewest two's-complement bytes of each decimal's unscaled value (Java's
    BigInteger.toByteArray, which Avro's decimal conversion writes), none for a zero: polars
    reads a decimal of no byte as 0, a Java writer writes one byte for it."""
    if not pa.types.is_decimal128(array.type):
        raise _NotJudgedError
    words = np.frombuffer(array.buffers()[1], dtype=np.int64)[2 * array.offset : 2 * (array.offset + len(array))]
    low, high = words[0::2], words[1::2]
    negative = high < 0
    # The magnitude's bits: the value's, or its complement's (-v - 1) where it is negative.
    low = np.where(negative, ~low, low).view(np.uint64)
    high = np.where(negative, ~high, high).view(np.uint64)
    out = np.ones(len(array), dtype=np.int64)
    wide = high > 0
    # Below 2**63 in the low word: 1-8 bytes; above it, 9-16, by the high word's bits.
    for bound in _BYTE_BOUNDS:
        out += np.where(wide, high >= bound, low >= bound)
    out += np.where(wide, 8, low >= np.uint64(1 << 63))
    out[(words[0::2] == 0) & (words[1::2] == 0)] = 0
    return out
