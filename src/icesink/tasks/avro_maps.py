"""Avro maps through polars' Avro reader, which has none (it panics on one): a map is read as the
array of key-value records it is encoded as, and those lists become Arrow maps again in the
table's columns.

An Avro map and an array of records {key: string, value: V} have one encoding: blocks of a count
(negative: followed by the block's size in bytes), then that many items, a zero count last; a
map's item is its key then its value, a record's its fields in order. So the reading is exact,
and the end marker after each record (tasks/decode_avro.py) still checks that it was.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from icesink.tasks.avro_schemas import rewritten

_ENTRY = "IcesinkMapEntry"


def entries_for_maps(schema: Any) -> Any:
    """An (inlined) Avro schema with every map an array of {key, value} records, each named apart."""
    count = [0]

    def change(t: Any) -> Any:
        if not isinstance(t, dict) or t.get("type") != "map":
            return t
        count[0] += 1
        entry = {
            "type": "record",
            "name": f"{_ENTRY}{count[0]}",
            "fields": [{"name": "key", "type": "string"}, {"name": "value", "type": t.get("values")}],
        }
        return {"type": "array", "items": entry}

    return rewritten(schema, change)


def _has_map(t: pa.DataType) -> bool:
    if pa.types.is_map(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_map(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_map(t.value_type)
    return False


def as_column(array: Any, target: pa.DataType) -> pa.Array:
    """Decoded values as a column of `target`: a cast (structs by field name, a field the values
    lack null), where the lists of key-value records a map was read as (`entries_for_maps`) become
    maps, at any depth."""
    if not _has_map(target):
        return array.cast(target, safe=True)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(target):
        # A field the writer schema lacks (the table's, from another writer's): null in its rows.
        names = {array.type.field(k).name for k in range(array.type.num_fields)}
        children = [as_column(array.field(f.name), f.type) if f.name in names else pa.nulls(len(array), f.type)
                    for f in target]  # fmt: skip
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_map(target):
        entries = _unsliced(array.cast(pa.list_(array.type.value_field)), mask)  # a map's offsets are int32
        keys = as_column(entries.values.field("key"), target.key_type)
        items = as_column(entries.values.field("value"), target.item_type)
        return pa.MapArray.from_arrays(entries.offsets, keys, items, type=target, mask=mask)
    lists = _unsliced(array.cast(pa.list_(array.type.value_field) if pa.types.is_list(target) else array.type), mask)
    kind = pa.ListArray if pa.types.is_list(target) else pa.LargeListArray
    return kind.from_arrays(lists.offsets, as_column(lists.values, target.value_type), type=target, mask=mask)


def _unsliced(lists: pa.Array, mask: pa.Array | None) -> pa.Array:
    """`lists` at offset 0 when it has nulls: from_arrays takes no validity beside sliced offsets."""
    return pa.concat_arrays([lists]) if lists.offset and mask is not None else lists
