"""The rows of one Connect schema's payloads in a table's columns, for tasks/decode_connect.py: a
record at a time from the payloads orjson parsed, or a batch at a time from their text
(tasks/connect_batches.py), both read as JSON types first (tasks/connect_values.read) and then
converted alike. A Debezium envelope's rows are its image (`before` for a delete), the operation
column and the `_source_<name>` columns (schema/envelope.py row_type). Pure: no Spark session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StructField, StructType

from icesink.schema.connect import Node
from icesink.schema.envelope import OPS, SOURCE_PREFIX, EnvelopeSpec
from icesink.tasks.connect_batches import read_payloads, reads_whole
from icesink.tasks.connect_values import converted, read
from icesink.tasks.decode_json import DeclinedValueError


class SchemaRows:
    """The rows of one Connect schema's payloads in the table's columns: a record at a time from
    the payloads orjson parsed (`columns`), or a batch at a time from their text (`parsed`),
    both read as JSON types first (tasks/connect_values.read) and converted alike."""

    def __init__(self, root: Node, table: StructType, envelope: EnvelopeSpec | None) -> None:
        self._root = root
        self._fields = dict(root.fields)
        self._table = table
        self._envelope = envelope
        self._whole = reads_whole(root)
        if envelope is not None:
            self._image = self._fields.get("after") or self._fields["before"]
            # Read whole, a payload field the schema lacks is passed over: the record-at-a-time way
            # checks that `source` is an object even then.
            self._whole = self._whole and {"before", "after", "source"} <= self._fields.keys()
            source = self._fields.get("source")
            wanted = {n[len(SOURCE_PREFIX) :] for n in table.names if n.startswith(SOURCE_PREFIX)}
            self._source = None if source is None else replace(source, fields=tuple(
                (name, n) for name, n in source.fields if name in wanted
            ))  # fmt: skip

    def columns(self, payloads: Sequence[dict[str, Any]]) -> list[pa.Array]:
        if self._envelope is None:
            return self._rows(read(self._root, payloads))
        ops = [p.get("op") for p in payloads]
        if not set(map(type, ops)) <= {str}:
            raise DeclinedValueError("a change event without an op Debezium writes")
        images = [p.get("before") if op == "d" else p.get("after") for p, op in zip(payloads, ops, strict=True)]
        if not set(map(type, images)) <= {dict}:
            raise DeclinedValueError("a change event without its row image")
        sources = [p.get("source") for p in payloads]
        if not set(map(type, sources)) <= {dict, type(None)}:
            raise DeclinedValueError("a change event whose source is not an object")
        source = read(self._source, sources) if self._source is not None else None
        return self._changes(pa.array(ops, pa.string()), read(self._image, images), source)

    def parsed(self, payloads: Sequence[bytes]) -> list[pa.Array] | None:
        """`columns` of the payloads' text read whole (tasks/connect_batches.py); None where they
        are not read so, or a record is not one the table takes (decided a record at a time)."""
        struct = read_payloads(self._root, payloads) if self._whole else None
        if struct is None:
            return None
        try:
            if self._envelope is None:
                return self._rows(struct)
            parts = dict(zip(struct.type.names, struct.flatten(), strict=True))
            image = pc.if_else(pc.equal(parts["op"], "d"), parts["before"], parts["after"])
            return self._changes(parts["op"], image, parts.get("source"))
        except _DECLINED:
            return None

    def _rows(self, payload: pa.Array) -> list[pa.Array]:
        values = dict(zip(payload.type.names, payload.flatten(), strict=True))
        return [_column(self._fields, values, f, len(payload)) for f in self._table.fields]

    def _changes(self, ops: pa.Array, image: pa.Array, source: pa.Array | None) -> list[pa.Array]:
        """A Debezium envelope's rows (schema/envelope.py row_type): the image (`before` for a
        delete), the operation, the source fields."""
        assert self._envelope is not None
        at = pc.index_in(ops, value_set=_OPS)
        if at.null_count:
            raise DeclinedValueError("a change event without an op Debezium writes")
        if image.null_count:
            raise DeclinedValueError("a change event without its row image")
        images = dict(zip(image.type.names, image.flatten(), strict=True))
        sources = dict(zip(source.type.names, source.flatten(), strict=True)) if source is not None else {}
        source_fields = dict(self._source.fields) if self._source is not None else {}
        image_fields = dict(self._image.fields)
        out = []
        for f in self._table.fields:
            name = f.name[len(SOURCE_PREFIX) :] if f.name.startswith(SOURCE_PREFIX) else None
            if f.name == self._envelope.operation_column:
                out.append(_CODES.take(at))
            elif name is not None and name in source_fields:
                out.append(converted(source_fields[name], sources[name], f.dataType))
            else:
                out.append(_column(image_fields, images, f, len(ops)))
        return out


# What declines a batch read whole (tasks/table_out.REFUSED, but a partition's).
_DECLINED = (pa.ArrowException, UnicodeError, OverflowError, DeclinedValueError)
_OPS = pa.array(sorted(OPS), pa.string())
_CODES = pa.array([OPS[op] for op in sorted(OPS)], pa.string())


def _column(fields: dict[str, Node], values: dict[str, pa.Array], target: StructField, rows: int) -> pa.Array:
    """The column `target` of a struct's read values: converted, or nulls where its schema lacks it."""
    found = fields.get(target.name)
    if found is None:
        return pa.nulls(rows, to_arrow_type(target.dataType))
    return converted(found, values[target.name], target.dataType)
