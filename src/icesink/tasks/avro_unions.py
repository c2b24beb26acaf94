"""The union check of the one-pass Avro decoder (tasks/decode_avro.py) where tasks/avro_positions.py
cannot place the indexes: polars reads an index other than the null branch's as one branch or the
other (the value when null comes first), where Avro's Java reader (Spark's decoder) refuses an index
beyond the union; so a block's records are read again with each union as its branch index, grouped
by which of their unions are null, and every index checked (and every decimal's bytes: polars
reads none as 0, which Java refuses).

Pure: Arrow and numpy (the reading itself is decode_avro's).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icesink.tasks.semantic_values import Path

# The records are read once per combination of null union fields (~0.7 ms each): beyond this
# many combinations in one Arrow batch (sparse optional fields), Spark's decoder.
MAX_NULL_PATTERNS = 32
_WORD = 62  # unions a word of a record's null pattern holds
Unions = tuple[tuple[Path, int], ...]  # (field path, the position of "null" in its union)

# Steps of a field path into an array's items and a map's values (no Avro name can be either).
ITEMS, VALUES = "[]", "{}"
_UNION = "__icesink_union_"
_SKIPPED = "__icesink_skipped_"
_DECIMAL = "__icesink_decimal_"


def union_column(j: int) -> str:
    return f"{_UNION}{j}"


def index_fields(fields: list[dict[str, Any]], unions: Unions, nulls: frozenset[Path]) -> list[dict[str, Any]]:
    """The fields of records whose null unions are `nulls`, as one flat record: each union read as
    its branch index (a long, `union_column` of its number), then, where it is not null, its
    branch. polars reads an index other than the null branch's as one branch or the other, where
    Avro (Spark's decoder) refuses an index beyond the union; this reading checks the index of each
    record. A decimal on bytes is read as its bytes: polars reads none as 0, which Java refuses.

    Flat, because a record's encoding is its fields' encodings end to end: the fields of nested
    records (and of a union's record branch) are read in place of the record, so the check keeps
    only the index columns and builds no struct (half the cost of a nested reading, in a Debezium
    envelope). The other fields are renamed: they are parsed, never kept."""
    out: list[dict[str, Any]] = []
    numbers = {path: j for j, (path, _) in enumerate(unions)}

    def walk(fields: list[dict[str, Any]], path: Path) -> None:
        for f in fields:
            at, t = (*path, f["name"]), f["type"]
            if isinstance(t, list):
                out.append({"name": union_column(numbers[at]), "type": "long"})
                if at in nulls:
                    continue
                [t] = [b for b in t if b != "null"]
            if isinstance(t, dict) and t.get("type") == "record":
                walk(t["fields"], at)
            elif isinstance(t, dict) and (t.get("type"), t.get("logicalType")) == ("bytes", "decimal"):
                out.append({"name": f"{_DECIMAL}{len(out)}", "type": "bytes"})
            else:
                out.append({"name": f"{_SKIPPED}{len(out)}", "type": t})

    walk(fields, ())
    return out


def is_checked(name: str) -> bool:
    """Whether a field of `index_fields` is a union's index or a decimal's bytes (the others are
    read, not kept)."""
    return name.startswith((_UNION, _DECIMAL))


def null_groups(unions: Unions, decoded: pa.Table) -> list[tuple[frozenset[Path], pa.Array | None]] | None:
    """The records grouped by which of their unions are null: each group's null unions and its
    records' positions (None when every record is in the one group); None beyond
    `MAX_NULL_PATTERNS` groups. A record's pattern is a bit per union (set: null), in 62-bit words
    (int64 arithmetic, no sign bit), as many as the unions need; the records are sorted by it once
    and each group is a run of them."""
    if not decoded.num_rows:
        return []
    words = []
    for start in range(0, len(unions), _WORD):
        word = None
        for j, (path, _) in enumerate(unions[start : start + _WORD]):
            bit = pc.multiply(pc.cast(pc.is_null(column_at(decoded, path)), pa.int64()), 1 << j)
            word = bit if word is None else pc.add(word, bit)
        words.append(word)
    patterns = pa.table(words, names=[f"w{k}" for k in range(len(words))])
    order = pc.sort_indices(patterns, sort_keys=[(name, "ascending") for name in patterns.column_names])
    ordered = [np.asarray(column) for column in patterns.take(order).columns]
    changed = np.zeros(max(len(order) - 1, 0), dtype=bool)
    for keys in ordered:
        changed |= keys[1:] != keys[:-1]
    starts = [0, *(np.flatnonzero(changed) + 1).tolist()]
    if len(starts) > MAX_NULL_PATTERNS:
        return None
    ends = [*starts[1:], len(order)]
    groups = []
    for a, b in zip(starts, ends, strict=True):
        nulls = frozenset(path for j, (path, _) in enumerate(unions) if int(ordered[j // _WORD][a]) >> (j % _WORD) & 1)
        groups.append((nulls, None if len(starts) == 1 else order.slice(a, b - a)))
    return groups


def indexes_as_read(checked: pa.Table, unions: Unions, nulls: frozenset[Path]) -> bool:
    """Whether every union index read is its null branch's where the value is null, else the other's
    (unions inside a null value are not in the records: not checked), and no decimal is of no byte."""
    for name in checked.column_names:
        if name.startswith(_DECIMAL) and pc.any(pc.equal(pc.binary_length(checked.column(name)), 0)).as_py():
            return False
    for j, (path, null_at) in enumerate(unions):
        if any(path[:k] in nulls for k in range(1, len(path))):
            continue
        want = null_at if path in nulls else 1 - null_at
        if not pc.all(pc.equal(checked.column(union_column(j)), want)).as_py():
            return False
    return True


def column_at(table: pa.Table, path: Path) -> pa.Array:
    """The values at a field path of decoded records: null where the field or a record around it
    is; past `ITEMS` (`VALUES`), those of every element of the arrays (every value of the maps,
    read as arrays of key-value records: tasks/avro_maps.py) there."""
    column = table.column(path[0])
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    for name in path[1:]:
        if name in (ITEMS, VALUES):
            array = pc.list_flatten(array)
            array = pc.struct_field(array, "value") if name == VALUES else array
        else:
            array = pc.struct_field(array, name)
    return array
