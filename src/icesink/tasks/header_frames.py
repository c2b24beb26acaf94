"""Avro records whose writer schema a record header names, for the one-pass tasks. Newer Confluent
serializers leave the value a bare body and put the schema in a header (`__value_schema_id`): 0x00
and the 4-byte id, or 0x01 and the schema's 16-byte GUID (kafka/wire.py). Spark's path takes the
first header of that name when it has one of those two shapes, else the value's own frame
(batch/decode/avro.py `_in_header`); so do these.

A record named by id is given the frame its header holds, before its body: it is then a framed
record like any other (the decoder's writer schemas are keyed by frame). A GUID is declined: the
tasks know their writer schemas by id. Pure: Arrow only.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from icesink.kafka import wire

_ID = pa.scalar(bytes([wire.MAGIC]), pa.binary())
_GUID = pa.scalar(bytes([wire.GUID_MAGIC]), pa.binary())


def _shaped(headers: pa.Array, size: int, magic: pa.Scalar) -> pa.Array:
    first = pc.binary_slice(headers, 0, 1)
    return pc.fill_null(pc.and_(pc.equal(pc.binary_length(headers), size), pc.equal(first, magic)), False)


def by_id(headers: pa.Array) -> pa.Array:
    """Whether each record's header names its schema by id (0x00 + 4 bytes)."""
    return _shaped(headers, wire.HEADER_SIZE, _ID)


def by_guid(headers: pa.Array) -> pa.Array:
    """Whether each record's header names its schema by GUID (0x01 + 16 bytes)."""
    return _shaped(headers, wire.GUID_HEADER_SIZE, _GUID)


def named(headers: pa.Array) -> pa.Array:
    """Whether each record's header names its schema (by id or by GUID): its value is a bare body."""
    return pc.or_(by_id(headers), by_guid(headers))


def framed(values: pa.Array, headers: pa.Array | None) -> pa.Array | None:
    """`values` with each record named by id in a header given that frame before its body; None
    when a header names a schema by GUID (declined). `headers`: each record's first schema-id
    header (null: none)."""
    if headers is None or headers.null_count == len(headers):
        return values
    if pc.any(by_guid(headers)).as_py():
        return None
    ids = by_id(headers)
    if not pc.any(ids).as_py():
        return values
    # binary_join_element_wise with an empty separator: the header's bytes, then the body's.
    joined = pc.binary_join_element_wise(pc.cast(headers, values.type), values, pa.scalar(b"", values.type))
    out = pc.if_else(ids, joined, values)
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out
