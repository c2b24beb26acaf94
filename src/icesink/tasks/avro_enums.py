"""Avro enums at any depth through polars' Avro reader, which reads one as a field of the top
record only (anywhere else it cannot): every enum is read as the int it is encoded as (its
symbol's index, a zig-zag varint, as an Avro int), and the indexes become their symbols in Arrow,
strings as Spark's from_avro makes them. An index beyond the symbols refuses the block: Avro's
Java reader refuses such a body, which tasks/avro_bodies.py then makes a dead letter of.

Pure: Arrow only (the reading itself is tasks/decode_avro.py's).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from icesink.tasks.avro_schemas import rewritten


def ints_for_enums(schema: Any) -> Any:
    """An (inlined) Avro schema with every enum an int: what polars reads."""
    return rewritten(schema, lambda t: "int" if isinstance(t, dict) and t.get("type") == "enum" else t)


def has_enum(schema: Any) -> bool:
    return bool(ints_for_enums(schema) != schema)


class EnumIndexError(ValueError):
    """An enum's index that is not one of its symbols'."""


def symbols_for_ints(array: Any, schema: Any) -> pa.Array:
    """The values of `array`, read with `ints_for_enums(schema)` (maps as arrays of entries,
    tasks/avro_maps.py), with each enum's indexes as its symbols; EnumIndexError if one is
    not a symbol's."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if not has_enum(schema):
        return array
    if isinstance(schema, list):
        [branch] = [b for b in schema if b != "null"]
        return symbols_for_ints(array, branch)
    kind = schema.get("type")
    if isinstance(kind, (dict, list)):
        return symbols_for_ints(array, kind)
    if array.offset:
        array = pa.concat_arrays([array])  # offset 0: rebuilt from its children and a validity mask
    mask = array.is_null() if array.null_count else None
    if kind == "enum":
        symbols = schema["symbols"]
        low, high = pc.min_max(array).values()
        if low.is_valid and (low.as_py() < 0 or high.as_py() >= len(symbols)):
            raise EnumIndexError(f"enum {schema.get('name')}: index {high.as_py()} of {len(symbols)} symbols")
        return pc.take(pa.array(symbols, pa.large_string()), array)
    if kind == "record":
        children = [symbols_for_ints(array.field(f["name"]), f["type"]) for f in schema["fields"]]
        fields = [pa.field(f["name"], c.type) for f, c in zip(schema["fields"], children, strict=True)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    assert kind == "array", kind  # a map is read as the array of its entries
    values = symbols_for_ints(array.values, schema.get("items"))
    kind_of = pa.LargeListArray if pa.types.is_large_list(array.type) else pa.ListArray
    return kind_of.from_arrays(array.offsets, values, mask=mask)
