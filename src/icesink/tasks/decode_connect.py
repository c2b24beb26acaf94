"""Kafka Connect JSON records (JsonConverter with schemas on: `{"schema": S, "payload": P}`, the
default of a Debezium connector) straight to Arrow columns, in the tasks, for the one-pass write.

Each record's own Connect schema says what its payload holds (schema/connect.py reads it, for
Spark's path too): a task parses each distinct schema once, and takes its records only when its
row fits the table as it is (every field a column of the table, of a type the column holds:
`schema.evolution.fits`), so nothing here evolves a table. The values convert as Spark's path
converts them (tasks/connect_values.py). A Debezium envelope becomes its row as for Avro
(schema/envelope.py): the image, the operation column, the `_source_<name>` columns. Connect JSON
record keys fill the key column with their payloads' structs (`ConnectRows`).

As tasks/decode_json.py, a record that is not beyond doubt the row Spark's path would make (not
Connect JSON, a schema that does not fit, a value not of its schema's type, a decimal that does
not fit, an event without an image) declines its table's records, which then take Spark's path
(new columns, dead letters). Pure: no Spark session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    DataType,
    StringType,
    StructType,
)

from icesink.schema.connect import ConnectSchemaError, Node, parse_schema
from icesink.schema.envelope import OPS, SOURCE_PREFIX, EnvelopeError, EnvelopeSpec, row_type
from icesink.schema.evolution import fits
from icesink.tasks.carried_rows import CarriedRows, carried_columns, fill_from_key
from icesink.tasks.connect_payloads import Readers
from icesink.tasks.connect_values import converted
from icesink.tasks.decode_json import DeclinedValueError


@dataclass(frozen=True)
class DirectConnect:
    """A table's share of the direct job when its records are Connect JSON: the table's columns
    (Spark's types, for the schemas' check) and its Debezium envelope, if its records are change
    events; pickled into the tasks."""

    table: StructType
    envelope: EnvelopeSpec | None = None


# ---------------------------------------------------------------- a schema's rows


class _Reader:
    """The rows of one Connect schema's payloads in the table's columns."""

    def __init__(self, root: Node, table: StructType, envelope: EnvelopeSpec | None) -> None:
        self._fields = dict(root.fields)
        self._table = table
        self._envelope = envelope

    def columns(self, payloads: Sequence[dict[str, Any]]) -> list[pa.Array]:
        if self._envelope is None:
            names = self._table.names
            values = _fields_of(payloads, names)
            return [self._column(self._fields, values[i], f.dataType, f.name) for i, f in enumerate(self._table.fields)]
        return self._changes(payloads, self._envelope)

    @staticmethod
    def _column(fields: dict[str, Node], values: Sequence[Any], target: DataType, key: str) -> pa.Array:
        found = fields.get(key)
        if found is None:
            return pa.nulls(len(values), to_arrow_type(target))
        return converted(found, values, target)

    def _changes(self, payloads: Sequence[dict[str, Any]], envelope: EnvelopeSpec) -> list[pa.Array]:
        """A Debezium envelope's rows (schema/envelope.py row_type): the image (`before` for a
        delete), the operation, the source fields."""
        ops = [p.get("op") for p in payloads]
        codes = [OPS.get(op) if type(op) is str else None for op in ops]
        if None in codes:
            raise DeclinedValueError("a change event without an op Debezium writes")
        images = [p.get("before") if op == "d" else p.get("after") for p, op in zip(payloads, ops, strict=True)]
        if not set(map(type, images)) <= {dict}:
            raise DeclinedValueError("a change event without its row image")
        source = self._fields.get("source")
        source_fields = dict(source.fields) if source is not None else {}
        sources = [p.get("source") for p in payloads]
        if not set(map(type, sources)) <= {dict, type(None)}:
            raise DeclinedValueError("a change event whose source is not an object")
        image = self._fields.get("after") or self._fields["before"]
        image_fields = dict(image.fields)
        # Each column's values in one pass over the images (and the sources, for the source columns).
        names = self._table.names
        of_image = dict(zip(names, _fields_of(images, names), strict=True))
        wanted = [n[len(SOURCE_PREFIX) :] for n in names if n.startswith(SOURCE_PREFIX)]
        of_source = dict(zip(wanted, _fields_of(sources, wanted), strict=True))
        out = []
        for f in self._table.fields:
            name = f.name[len(SOURCE_PREFIX) :] if f.name.startswith(SOURCE_PREFIX) else None
            if f.name == envelope.operation_column:
                out.append(pa.array(codes, pa.string()))
            elif name is not None and name in source_fields:
                out.append(self._column(source_fields, of_source[name], f.dataType, name))
            else:
                out.append(self._column(image_fields, of_image[f.name], f.dataType, f.name))
        return out


def _fields_of(objects: Sequence[dict[str, Any] | None], names: Sequence[str]) -> list[Sequence[Any]]:
    """The values of each of `names` in `objects` (None where an object is None or lacks it), as
    one list per name: one pass over the objects, the lookups in C."""
    if not names:
        return []
    empty: dict[str, Any] = {}
    rows = [tuple(map((o if o is not None else empty).get, names)) for o in objects]
    return list(zip(*rows, strict=True)) if rows else [() for _ in names]


def reader(text: bytes, decoder: DirectConnect) -> _Reader | None:
    """The reader of the records of Connect schema `text`, or None when its rows do not fit the
    table as it is (a new field, a wider or another type: Spark's path evolves the table or makes
    them dead letters), or it is not a schema Spark's path reads."""
    try:
        schema = parse_schema(text.decode("utf-8"))
        row = schema.result_type if decoder.envelope is None else row_type(schema.result_type, decoder.envelope)
    except (ConnectSchemaError, EnvelopeError, UnicodeDecodeError):
        return None
    table = {f.name: f.dataType for f in decoder.table.fields}
    if not all(f.name in table and fits(f.dataType, table[f.name]) for f in row.fields):
        return None
    if decoder.envelope is not None:
        parts = dict(schema.root.fields)
        if not isinstance(parts["op"].result, StringType):
            return None
        before, after = parts.get("before"), parts.get("after")
        if before is not None and after is not None and before.result != after.result:
            return None  # Debezium's are one schema; two would each need their own columns
    return _Reader(schema.root, decoder.table, decoder.envelope)


Payload = tuple[_Reader | None, dict[str, Any] | None]  # a record's reader and payload (None, None: no row)


def _columns(payloads: Sequence[Payload], table: StructType) -> list[pa.Array]:
    """The rows of `payloads`, in their order, as the table's columns (a row of nulls where there
    is no reader), a schema's records at a time."""
    groups: dict[int, tuple[_Reader | None, list[int]]] = {}
    for i, (read, _) in enumerate(payloads):
        groups.setdefault(id(read), (read, []))[1].append(i)
    parts = []
    for read, at in groups.values():
        if read is None:
            arrays = [pa.nulls(len(at), to_arrow_type(f.dataType)) for f in table.fields]
        else:
            arrays = read.columns([payloads[i][1] for i in at])  # type: ignore[misc]
        parts.append(pa.Table.from_arrays([pa.array(at, pa.int64()), *arrays], names=["i", *table.names]))
    rows = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    if len(parts) > 1:
        rows = rows.take(pc.sort_indices(rows.column("i")))
    return [c.combine_chunks() for c in rows.columns[1:]]


class ConnectRows(CarriedRows):
    """One table's rows from Connect JSON records, as tasks/plain_rows.DirectRows takes plain
    JSON ones (`add` a record at a time, `take` the rows as Arrow), with the same `carry` and
    `key_column`. With `key_decoder`, the record keys are Connect JSON too: the key column holds
    their payloads' structs, and a key column of the table's (`keys`) that a row lacks takes the
    record key's field of that name, as Spark's path fills it (changes.classify)."""

    def __init__(
        self, decoder: DirectConnect, carry: bool = False, key_column: str | None = None,
        key_decoder: DirectConnect | None = None, keys: Sequence[str] = (),
    ) -> None:  # fmt: skip
        super().__init__(carry, key_column)
        self._decoder = decoder
        self._readers = Readers(lambda text: reader(text, decoder))
        self._payloads: list[Payload] = []
        self._key_decoder = key_decoder
        self._key_readers = Readers(lambda text: reader(text, key_decoder)) if key_decoder is not None else None
        self._from_key = [
            k for k in keys if k != key_column and key_decoder is not None and k in key_decoder.table.names
        ]

    @property
    def rows(self) -> int:
        return len(self._payloads)

    def _mark(self) -> int:
        return len(self._payloads)

    def _rollback(self, mark: int) -> None:
        del self._payloads[mark:]

    def _row(self, value: bytes | None, routed: bool = False) -> bool:
        """Takes the record's payload, or says it is not Connect JSON with a schema whose rows fit the table."""
        if value is None and self._carry and self._key_column is not None:
            self._payloads.append((None, None))  # a tombstone
            return True
        found = self._readers.payload(value)
        if found is None:
            return False
        self._payloads.append(found)
        return True

    def take(self) -> pa.RecordBatch | None:
        """The rows taken since the last call (see DirectRows.take)."""
        if not self._payloads:
            return None
        payloads, self._payloads = self._payloads, []
        table = self._decoder.table
        # A tombstone is a row of nulls: its key column is set from the key after.
        arrays = _columns(payloads, table)
        carried = self._carried()
        keys: Sequence[bytes | None] | pa.Array
        keys, self._keys = self._keys, []
        if self._key_decoder is not None:
            keys = self._key_structs(keys, self._key_decoder)
            fill_from_key(arrays, table.names, keys, self._from_key)
        tombstones = [read is None for read, _ in payloads]
        return carried_columns(arrays, list(table.names), self._key_column, keys, carried, tombstones)

    def _key_structs(self, keys: Sequence[bytes | None], decoder: DirectConnect) -> pa.Array:
        """The record keys' payloads as the key column's structs (null for a null key); raises
        DeclinedValueError for a key that is not Connect JSON fitting the column (Spark's path: a
        key error, a dead letter)."""
        assert self._key_readers is not None
        found = [self._key_readers.payload(k) if k is not None else (None, None) for k in keys]
        if any(f is None for f in found):
            raise DeclinedValueError("a record key that is not Connect JSON of the key column's fields")
        payloads = [f for f in found if f is not None]
        columns = _columns(payloads, decoder.table)
        return pa.StructArray.from_arrays(
            columns, fields=[pa.field(f.name, c.type) for f, c in zip(decoder.table.fields, columns, strict=True)],
            mask=pa.array([k is None for k in keys], pa.bool_()),
        )  # fmt: skip
