"""A written file's column metrics, read from the Parquet footer its writer sent along, the way
Iceberg 1.11's `ParquetUtil.footerMetrics` reads them (`ParquetMetrics`), laid out as the metrics
fields of Iceberg's `ContentFileParser` JSON. With them the commit describes a file in two py4j
calls (the JSON read, `ContentFileParser.fromJson`), where Iceberg's builders and footer reader
took ~13 a file: a Debezium batch into a `bucket(16)` table commits 32 files.

Pure: the metrics mode of each column comes from the caller (Iceberg's `MetricsConfig`, asked in
the JVM). Anything this reading is not sure to read as Iceberg does gives None, and the commit
describes that file through Java (file_descriptions.py): a type it does not convert, a column
without statistics or field id, a mode it does not know, a string bound that is not UTF-8, a file
of no row group. tests/integration/test_footer_metrics.py holds both readings to the same JSON.

One departure, on the safe side: where a row group's chunk of strings or bytes holds values but no
min and max (the writer leaves them out of a value over 4 KiB), Iceberg takes the file's bounds from
the other row groups, bounds that value lies outside (a reader looking for it would skip the file);
here the column gets none. (A chunk of floats has none when its values are all NaN, which bounds
leave out anyway: Iceberg's reading is kept.)
"""

from __future__ import annotations

import json
import logging
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger(__name__)

# A column's metrics mode by its Iceberg name, as the file's schema names it ("none", "counts",
# "truncate(16)", "full"), or None when the caller cannot say.
ModeOf = Callable[[str], "str | None"]

_TRUNCATE = re.compile(r"truncate\((\d+)\)")
_FULL = 1 << 31  # Iceberg's Integer.MAX_VALUE: bounds kept whole
_MAX_CODE_POINT = 0x10FFFF


class DeclinedError(Exception):
    """This footer holds something read only by Iceberg's own reader."""


@dataclass(frozen=True)
class _Leaf:
    field_id: int
    name: str  # Iceberg's name: dotted, `element`, `key` and `value` inside lists and maps
    kind: str | None  # the Iceberg type its values convert to; None: none this reading converts
    repeated: bool  # inside a list or a map: a column size only, as Iceberg keeps


def metrics(footer: bytes, mode_of: ModeOf) -> dict[str, Any] | None:
    """The ContentFileParser metrics fields (record count, column sizes, value, null and NaN
    counts, lower and upper bounds) of the file whose footer-only Parquet file is `footer`, or
    None when Iceberg's reader must make them."""
    try:
        return _metrics(pq.read_metadata(pa.BufferReader(footer)), mode_of)
    except DeclinedError:
        return None
    except (pa.ArrowException, ValueError, OverflowError, struct.error) as e:  # a footer pyarrow reads otherwise
        log.warning("a file's metrics are left to Iceberg's reader: %s: %s", type(e).__name__, e)
        return None


def _metrics(meta: pq.FileMetaData, mode_of: ModeOf) -> dict[str, Any]:
    if meta.num_row_groups == 0:
        raise DeclinedError("no row group")  # Iceberg gives no column sizes then: never written here
    leaves = _leaves(meta)
    sizes: dict[int, int] = {}
    counts: dict[int, tuple[int, int]] = {}
    lower: dict[int, bytes] = {}
    upper: dict[int, bytes] = {}
    for i, leaf in enumerate(leaves):
        length = _length(mode_of(leaf.name))
        if length is None:
            continue  # mode none: nothing of the column, not even its size
        chunks = [meta.row_group(r).column(i) for r in range(meta.num_row_groups)]
        sizes[leaf.field_id] = sum(c.total_compressed_size for c in chunks)
        if leaf.repeated:
            continue  # Iceberg keeps no counts nor bounds inside lists and maps
        if leaf.kind is None:
            raise DeclinedError(leaf.name)
        stats = [_stats(c, leaf) for c in chunks]
        counts[leaf.field_id] = (sum(c.num_values for c in chunks), sum(s.null_count for s in stats))
        bounds = _column_bounds(leaf.kind, chunks, stats, length)
        if bounds is None:
            continue
        low, high = bounds
        if low is not None:
            lower[leaf.field_id] = low
        if high is not None:
            upper[leaf.field_id] = high
    return {
        "record-count": meta.num_rows,
        "column-sizes": _map(sizes),
        "value-counts": _map({k: v for k, (v, _) in counts.items()}),
        "null-value-counts": _map({k: n for k, (_, n) in counts.items()}),
        "nan-value-counts": _map({}),  # Iceberg's footer reading counts none
        "lower-bounds": _map({k: v.hex().upper() for k, v in lower.items()}),
        "upper-bounds": _map({k: v.hex().upper() for k, v in upper.items()}),
    }


def _map(values: dict[int, Any]) -> dict[str, list[Any]]:
    keys = sorted(values)
    return {"keys": keys, "values": [values[k] for k in keys]}


def _length(mode: str | None) -> int | None:
    """The bound length of a mode: None for none, 0 for counts."""
    if mode == "none":
        return None
    if mode == "counts":
        return 0
    if mode == "full":
        return _FULL
    found = _TRUNCATE.fullmatch(mode or "")
    if found is None or int(found.group(1)) <= 0:
        raise DeclinedError(f"metrics mode {mode}")
    return int(found.group(1))


def _stats(chunk: Any, leaf: _Leaf) -> Any:
    stats = chunk.statistics if chunk.is_stats_set else None
    if stats is None or not stats.has_null_count:
        raise DeclinedError(f"{leaf.name}: no statistics")  # Iceberg then keeps no counts: rare enough
    return stats


# The Parquet leaf -> the Iceberg type ParquetSchemaUtil converts it to, for the types whose
# statistics this reading converts; decimals by their scale.
def _kind(column: Any) -> str | None:
    physical, logical = column.physical_type, column.logical_type
    name = logical.type
    details = json.loads(logical.to_json()) if name in ("INT", "TIMESTAMP", "TIME") else {}
    if name == "DECIMAL" and physical in ("INT32", "INT64", "FIXED_LEN_BYTE_ARRAY"):
        return f"decimal:{column.scale}"
    if physical == "BOOLEAN" and name == "NONE":
        return "boolean"
    if physical == "INT32":
        signed = name == "INT" and details.get("isSigned") and details.get("bitWidth") in (8, 16, 32)
        return "int" if name == "NONE" or signed else "date" if name == "DATE" else None
    if physical == "INT64":
        micros = details.get("timeUnit") == "microseconds"
        if name == "NONE" or (name == "INT" and details.get("isSigned") and details.get("bitWidth") == 64):
            return "long"
        return "long" if name in ("TIMESTAMP", "TIME") and micros else None  # 8 bytes either way
    if physical in ("FLOAT", "DOUBLE") and name == "NONE":
        return "float" if physical == "FLOAT" else "double"
    if physical == "BYTE_ARRAY":
        return "string" if name == "STRING" else "binary" if name == "NONE" else None
    if physical == "FIXED_LEN_BYTE_ARRAY":  # Iceberg reads a file's uuid column as a fixed[16]
        return "fixed" if name in ("UUID", "NONE") else None
    return None


def _leaves(meta: pq.FileMetaData) -> list[_Leaf]:
    """The file's leaf columns in Parquet's order, with their field ids and Iceberg names from the
    schema's Arrow form (which carries the ids, on list elements and map entries too)."""
    out: list[tuple[int, str, bool]] = []
    for field in meta.schema.to_arrow_schema():
        _walk(field, field.name, False, out)
    if len(out) != meta.num_columns:
        raise DeclinedError("the Arrow schema's leaves are not the file's columns")
    leaves = []
    for i, (field_id, name, repeated) in enumerate(out):
        column = meta.schema.column(i)
        if (column.max_repetition_level > 0) != repeated:
            raise DeclinedError(f"{name}: repetition")
        leaves.append(_Leaf(field_id, name, _kind(column), repeated))
    return leaves


def _walk(field: pa.Field, name: str, repeated: bool, out: list[tuple[int, str, bool]]) -> None:
    t = field.type
    if pa.types.is_struct(t):
        for child in t:
            _walk(child, f"{name}.{child.name}", repeated, out)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        _walk(t.value_field, f"{name}.element", True, out)
    elif pa.types.is_map(t):
        _walk(t.key_field, f"{name}.key", True, out)
        _walk(t.item_field, f"{name}.value", True, out)
    else:
        raw = (field.metadata or {}).get(b"PARQUET:field_id")
        if raw is None:
            raise DeclinedError(f"{name}: no field id")
        out.append((int(raw), name, repeated))


def _column_bounds(
    kind: str, chunks: list[Any], stats: list[Any], length: int
) -> tuple[bytes | None, bytes | None] | None:
    if length == 0:
        return None  # mode counts
    if kind in ("string", "binary", "fixed") and any(
        c.num_values > s.null_count and not s.has_min_max for c, s in zip(chunks, stats, strict=True)
    ):
        return None  # values the writer left out of the min and max: no bounds hold them all
    return _bounds(kind, [s for s in stats if s.has_min_max], length)


def _bounds(kind: str, stats: list[Any], length: int) -> tuple[bytes | None, bytes | None] | None:
    """The column's lower and upper bounds over its chunks' statistics, as Iceberg serializes
    them, or None when Iceberg keeps none (no value; a chunk with a NaN bound says none: `_values`)."""
    pairs = [p for p in (_values(kind, s) for s in stats) if p is not None]
    if not pairs:
        return None
    key = _order(kind)
    low = min((p[0] for p in pairs), key=key)
    high = max((p[1] for p in pairs), key=key)
    if kind == "string":
        return _utf8(_string_min(low, length)), _utf8(_string_max(high, length))
    if kind == "binary":
        return low[:length], _binary_max(high, length)
    return _serialized(kind, low), _serialized(kind, high)


def _values(kind: str, stats: Any) -> tuple[Any, Any] | None:
    """A chunk's (min, max) as Iceberg's values, as parquet-java reads them: a float's NaN drops
    both; a zero min is -0.0 and a zero max +0.0 (parquet-java's `FloatBuilder`)."""
    low, high = stats.min_raw, stats.max_raw
    if kind in ("float", "double"):
        if math.isnan(low) or math.isnan(high):
            return None
        low = -0.0 if low == 0 else low
        high = 0.0 if high == 0 else high
    elif kind == "string":
        low, high = _text(low), _text(high)
    elif kind.startswith("decimal:") and isinstance(low, bytes):
        low, high = int.from_bytes(low, "big", signed=True), int.from_bytes(high, "big", signed=True)
    return low, high


def _order(kind: str) -> Callable[[Any], Any]:
    if kind in ("float", "double"):
        return lambda v: (v, math.copysign(1.0, v))  # Java's Float.compare: -0.0 below 0.0
    if kind == "string":
        return lambda v: v.encode("utf-8")  # code point order, as Iceberg's comparator
    return lambda v: v


def _text(raw: bytes) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DeclinedError("a string bound that is not UTF-8") from e  # Java would put U+FFFD in
    return text


def _utf8(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


def _string_min(text: str, length: int) -> str:
    return text[:length]


def _string_max(text: str, length: int) -> str | None:
    """UnicodeUtil.truncateStringMax: the first `length` code points, the last one that can be
    incremented incremented (skipping the surrogates), or None."""
    if len(text) <= length:
        return text
    points = [ord(c) for c in text[:length]]
    for i in range(length - 1, -1, -1):
        if points[i] == _MAX_CODE_POINT:
            continue
        nxt = 0xE000 if points[i] == 0xD7FF else points[i] + 1
        return "".join(map(chr, points[:i])) + chr(nxt)
    return None


def _binary_max(data: bytes, length: int) -> bytes | None:
    """BinaryUtil.truncateBinaryMax: the first `length` bytes, the last that is not 0xFF
    incremented, or None."""
    if len(data) <= length:
        return data
    head = data[:length]
    for i in range(length - 1, -1, -1):
        if head[i] != 0xFF:
            return head[:i] + bytes([head[i] + 1])
    return None


def _serialized(kind: str, value: Any) -> bytes:
    """Iceberg's single-value serialization (`Conversions.toByteBuffer`)."""
    if kind in ("int", "date"):
        return struct.pack("<i", value)
    if kind == "long":
        return struct.pack("<q", value)
    if kind == "boolean":
        return b"\x01" if value else b"\x00"
    if kind == "float":
        return struct.pack("<f", value)
    if kind == "double":
        return struct.pack("<d", value)
    if kind == "fixed":
        return bytes(value)
    if kind.startswith("decimal:"):  # the unscaled value, in as few bytes as Java's BigInteger
        bits = value.bit_length() if value >= 0 else (~value).bit_length()
        return int(value).to_bytes(bits // 8 + 1, "big", signed=True)
    raise DeclinedError(kind)
