"""Debezium change events, decoded, into a table's rows in Arrow, in the tasks: the rows Spark's path
makes (batch/decode/debezium.py `row`): the image is `after`, or `before` for a delete; `op` c and
r become I, u U, d D in the operation column; a column `_source_<name>` takes the source field of
that name. An event Spark's path makes a dead letter of (no op, another op, no image) gets that
path's words in `problems`; its row is left for the caller to drop (tasks/decode_avro.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from icesink.schema.envelope import NO_IMAGE, NO_OP, OPS, UNKNOWN_OP
from icesink.tasks.avro_maps import as_column
from icesink.tasks.semantic_values import Path, converted

_SPELLINGS = pa.array(list(OPS))
_CODES = pa.array(list(OPS.values()))


@dataclass(frozen=True)
class Envelope:
    """A table's Debezium envelope, as the tasks need it; pickled into them."""

    operation_column: str
    source_prefix: str


def _column(decoded: pa.Table, name: str) -> pa.Array | None:
    if name not in decoded.column_names:
        return None
    column = decoded.column(name)
    if not isinstance(column, pa.ChunkedArray):
        return column
    # One chunk (polars' read) as it is: combine_chunks copies it (15 ms for 150,000 events' images).
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def problems(decoded: pa.Table) -> pa.Array | None:
    """Why each decoded envelope is a dead letter on Spark's path, in its words
    (batch/decode/debezium.py `envelope_error`; null for an event it takes), or None for none."""
    op, after, before = (_column(decoded, n) for n in ("op", "after", "before"))
    assert op is not None
    assert after is not None
    known = pc.is_in(op, value_set=_SPELLINGS)
    image = pc.if_else(pc.equal(op, "d"), before.is_valid() if before is not None else False, after.is_valid())
    if pc.all(pc.and_kleene(known, image)).as_py():
        return None
    spelled = pc.cast(pc.fill_null(op, ""), pa.string())  # polars reads large strings
    why = pc.if_else(
        pc.is_null(op),
        pa.scalar(NO_OP),
        pc.if_else(
            known,
            pc.if_else(image, pa.scalar(None, pa.string()), pc.binary_join_element_wise("op ", spelled, NO_IMAGE, "")),
            pc.binary_join_element_wise(UNKNOWN_OP, spelled, ""),
        ),
    )
    return why.combine_chunks() if isinstance(why, pa.ChunkedArray) else why


def envelope_rows(
    decoded: pa.Table, envelope: Envelope, schema: pa.Schema, semantics: Mapping[Path, str],
    spelled: Mapping[str, str] | None = None,
) -> pa.Table:  # fmt: skip
    """The rows of decoded envelopes (top-level fields `before`, `after`, `source`, `op`) in the
    table's columns (`schema`); those of events `problems` names are not rows of Spark's path.
    `spelled`: a case-insensitive table's columns -> the names of the rows' fields they take
    (batch/direct_shape.py; the image's fields, the operation and source columns)."""
    op, after, before, source = (_column(decoded, n) for n in ("op", "after", "before", "source"))
    assert op is not None
    assert after is not None
    found = pc.index_in(op, value_set=_SPELLINGS)
    deleting = pc.equal(op, "d")
    source_fields = set(source.type.names) if source is not None and pa.types.is_struct(source.type) else set()
    image_fields = set(after.type.names)
    prefix = envelope.source_prefix
    columns = []
    for f in schema:
        field = spelled.get(f.name, f.name) if spelled is not None else f.name
        name = field[len(prefix) :] if field.startswith(prefix) else None
        if field == envelope.operation_column:
            value = _CODES.take(found)
        elif name is not None and name in source_fields:
            assert source is not None
            value = converted(pc.struct_field(source, name), ("source", name), semantics)
        elif field in image_fields:
            was = pc.struct_field(before, field) if before is not None else None
            now = pc.struct_field(after, field)
            value = converted(pc.if_else(deleting, was, now) if was is not None else now, ("after", field), semantics)
        else:
            value = pa.nulls(len(op), f.type)
        columns.append(as_column(value, f.type))
    return pa.Table.from_arrays(columns, schema=schema)
