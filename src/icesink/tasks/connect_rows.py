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
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from icesink.schema.connect import Node
from icesink.schema.envelope import OPS, SOURCE_PREFIX, EnvelopeSpec, envelope_problem
from icesink.tasks.connect_batches import read_payloads, reads_whole
from icesink.tasks.connect_values import converted, read
from icesink.tasks.decode_json import DECLINED, DeclinedValueError


class SchemaRows:
    """The rows of one Connect schema's payloads in the table's columns: a record at a time from
    the payloads orjson parsed (`columns`), or a batch at a time from their text (`parsed`),
    both read as JSON types first (tasks/connect_values.read) and converted alike."""

    def __init__(self, root: Node, table: StructType, envelope: EnvelopeSpec | None) -> None:
        self._table = table
        self._envelope = envelope
        self._schema = root  # the whole payload's, for a dead letter's check (`letter`)
        # Only what the table's columns take is read, either way: a field of a struct the table's
        # struct lacks (schema.evolution.fits lets it) is passed over, not type-checked.
        self._root = pruned(root, table)
        self._fields = dict(self._root.fields)
        self._whole = reads_whole(self._root)
        if envelope is None:
            return
        fields = dict(root.fields)
        # The images the schema has: a payload's field it lacks is not read (Spark's path: no image).
        self._images = {name for name in ("before", "after") if name in fields}
        # Spark's path applies a default of the op or an image before it judges the event.
        self._defaults = any(fields[n].default is not None for n in ("op", "before", "after") if n in fields)
        types = {f.name: f.dataType for f in table.fields}
        self._image = pruned(fields.get("after") or fields["before"], table)
        source = fields.get("source")
        wanted = {n[len(SOURCE_PREFIX) :] for n in table.names if n.startswith(SOURCE_PREFIX)}
        self._source = None if source is None else replace(source, fields=tuple(
            (name, pruned(n, types[SOURCE_PREFIX + name])) for name, n in source.fields if name in wanted
        ))  # fmt: skip
        # Read whole: the images, the source (an object, as the record-at-a-time way checks even
        # when no column takes a field of it) and the op; every other field is passed over.
        self._whole = False
        if {"before", "after"} <= fields.keys() and self._source is not None:
            image, read = self._image, (("source", self._source), ("op", fields["op"]))
            self._root = replace(root, fields=(("before", image), ("after", image), *read))
            self._whole = reads_whole(self._root)

    def takes(self, payload: dict[str, Any]) -> bool:
        """Whether a payload is a change event's with an op Debezium writes and its row image (any
        payload of a table without an envelope)."""
        if self._envelope is None:
            return True
        op = payload.get("op")
        image = "before" if op == "d" else "after"
        return type(op) is str and op in OPS and image in self._images and type(payload.get(image)) is dict

    def letter(self, payload: dict[str, Any]) -> str | None:
        """Why a change event's payload that `takes` refused is a dead letter on Spark's path, in its
        words (schema/envelope.envelope_problem), where nothing else of it makes another error
        there first: every field of the payload of its schema's type (else TypeMismatch), each
        converting exactly (else ConversionFailed), and no default for its op or images. None
        otherwise."""
        op = payload.get("op")
        if self._envelope is None or self._defaults or (op is not None and type(op) is not str):
            return None
        image = "before" if op == "d" else "after"
        why = envelope_problem(op, image in self._images and payload.get(image) is not None)
        try:
            converted(self._schema, read(self._schema, [payload]), self._schema.result)
        except DECLINED:
            return None
        return why

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
        try:
            struct = read_payloads(self._root, payloads) if self._whole else None
            if struct is None:
                return None
            if self._envelope is None:
                return self._rows(struct)
            parts = dict(zip(struct.type.names, struct.flatten(), strict=True))
            image = pc.if_else(pc.equal(parts["op"], "d"), parts["before"], parts["after"])
            return self._changes(parts["op"], image, parts.get("source"))
        except DECLINED:
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


_OPS = pa.array(sorted(OPS), pa.string())
_CODES = pa.array([OPS[op] for op in sorted(OPS)], pa.string())


def _column(fields: dict[str, Node], values: dict[str, pa.Array], target: StructField, rows: int) -> pa.Array:
    """The column `target` of a struct's read values: converted, or nulls where its schema lacks it."""
    found = fields.get(target.name)
    if found is None:
        return pa.nulls(rows, to_arrow_type(target.dataType))
    return converted(found, values[target.name], target.dataType)


def pruned(n: Node, target: DataType) -> Node:
    """Connect schema `n` with only the struct fields the column type `target` has, at any depth."""
    if n.fields and isinstance(target, StructType):
        types = {f.name: f.dataType for f in target.fields}
        return replace(n, fields=tuple((name, pruned(child, types[name])) for name, child in n.fields if name in types))
    if n.element is not None and isinstance(target, ArrayType | MapType):
        inner = target.elementType if isinstance(target, ArrayType) else target.valueType
        return replace(n, element=pruned(n.element, inner))
    return n
