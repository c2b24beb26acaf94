"""Debezium change events in plain JSON (JsonConverter with schemas off) parsed a batch at a time by
Arrow's JSON reader, for tasks/plain_rows.DirectRows: the rows its record-at-a-time `_change`
makes (the image, `before` for a delete, the operation column, the `_source_<name>` columns), or
None where it may not make them alike, and the caller takes the batch a record at a time, which
decides each record as before.

The reader is given both images as structs of the table's image columns, the op and the source
columns wanted, and infers whatever else an event holds: an image field the table lacks shows as
a field of the image's struct the reader added (None: the record-at-a-time way declines such an
event), while other top-level and source fields are let pass, as that way lets them. A repeated
key, a value not of its column's type, an op Debezium does not write, an event without its image,
a double the record-at-a-time check might read otherwise (decode_json.doubtful) give None.
Pure: no Spark.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from icesink.schema.envelope import OPS, SOURCE_PREFIX, EnvelopeSpec
from icesink.tasks.decode_json import DirectColumn, doubles_of, doubtful, read_whole

_OPS = pa.array(sorted(OPS), pa.string())
_DEPTH = 900
_CODES = pa.array([OPS[op] for op in sorted(OPS)], pa.string())


def parsed_changes(
    columns: Sequence[DirectColumn], envelope: EnvelopeSpec, image: frozenset[str], values: Sequence[bytes]
) -> list[pa.Array] | None:
    """The table's columns (`columns`; `image`: those an event's image fills) of the change events
    `values`, a column of nulls for any other (the record key's), or None (see the module)."""
    images = [c for c in columns if c.name in image]
    wanted = {SOURCE_PREFIX + n: n for n in envelope.source_columns}
    sources = [(c, wanted[c.name]) for c in columns if c.name in wanted and c.name not in image]
    table = _read(images, sources, values)
    if table is None:
        return None
    op = table.column("op").combine_chunks()
    at = pc.index_in(op, value_set=_OPS)
    if at.null_count:
        return None  # no op, or one Debezium does not write
    delete = pc.equal(op, "d")
    by_image = _images(images, table, delete)
    by_source = _sources(sources, table)
    if by_image is None or by_source is None:
        return None
    found = {envelope.operation_column: _CODES.take(at), **by_source, **by_image}
    return [found[c.name] if c.name in found else pa.nulls(len(values), c.arrow_type) for c in columns]


def _read(
    images: list[DirectColumn], sources: list[tuple[DirectColumn, str]], values: Sequence[bytes]
) -> pa.Table | None:
    """The events read with both images as structs of the image columns and the source columns'
    fields; None where an image holds a field the table lacks (the reader added it)."""
    struct = pa.struct([pa.field(c.name, c.arrow_type) for c in images])
    source = pa.struct([pa.field(name, c.arrow_type) for c, name in sources])
    schema = pa.schema([("before", struct), ("after", struct), ("op", pa.string()), ("source", source)])
    # The reader infers fields at any depth; the record-at-a-time way refuses an event nested past
    # Python's reader's limit (~1,000).
    table = read_whole(schema, values, "infer", brackets=_DEPTH)
    if table is None or table.num_rows != len(values):
        return None
    # The source's other fields the reader adds to its struct (let pass); an image's, refused.
    read = table.schema
    return table if read.field("before").type == struct and read.field("after").type == struct else None


def _images(images: list[DirectColumn], table: pa.Table, delete: pa.Array) -> dict[str, pa.Array] | None:
    """Each image column of the events' rows (`before` for a delete, else `after`); None for an
    event without its image, or a double of either image in doubt."""
    before, after = table.column("before").combine_chunks(), table.column("after").combine_chunks()
    if not pc.all(pc.if_else(delete, pc.is_valid(before), pc.is_valid(after))).as_py():
        return None
    olds, news = before.flatten(), after.flatten()
    for c, old, new in zip(images, olds, news, strict=True):
        if any(doubtful(d) for a in (old, new) for d in doubles_of(c, a)):
            return None
    return {c.name: pc.if_else(delete, old, new) for c, old, new in zip(images, olds, news, strict=True)}


def _sources(sources: list[tuple[DirectColumn, str]], table: pa.Table) -> dict[str, pa.Array] | None:
    """Each source column; None for a double in doubt, or a struct to which the reader added a
    field (the record-at-a-time way refuses a field a struct column lacks)."""
    source = table.column("source").combine_chunks()
    found = {c.name: pc.struct_field(source, name) for c, name in sources}
    for c, _ in sources:
        if found[c.name].type != c.arrow_type or any(doubtful(d) for d in doubles_of(c, found[c.name])):
            return None
    return found
