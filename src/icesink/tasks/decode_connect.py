"""Kafka Connect JSON records (JsonConverter with schemas on: `{"schema": S, "payload": P}`, the
default of a Debezium connector) straight to Arrow columns, in the tasks, for the one-pass write.

Each record's own Connect schema says what its payload holds (schema/connect.py reads it, for
Spark's path too): a task parses each distinct schema once, and takes its records only when its
row fits the table as it is (every field a column of the table, of a type the column holds:
`schema.evolution.fits`), so nothing here evolves a table. The values convert as Spark's path
converts them (tasks/connect_values.py). A Debezium envelope becomes its row as for Avro
(schema/envelope.py): the image, the operation column, the `_source_<name>` columns. Connect JSON
record keys fill the key column with their payloads' structs (`ConnectRows`). A batch whose records
carry one schema, laid out alike, is read whole by Arrow's JSON reader (tasks/connect_batches.py),
else a record at a time (tasks/connect_rows.py holds both ways).

As tasks/decode_json.py, a record that is not beyond doubt the row Spark's path would make (not
Connect JSON, a schema that does not fit, a value not of its schema's type, a decimal that does
not fit) declines its table's records, which then take Spark's path (new columns, dead letters).
A change event with no op, an op Debezium does not write or no row image is that path's dead
letter here too, in its words, where nothing else of it is another error there (`letter`).
Pure: no Spark session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StringType, StructType

from icesink.schema.connect import ConnectSchemaError, parse_schema
from icesink.schema.envelope import EnvelopeError, EnvelopeSpec, row_type
from icesink.schema.evolution import fits
from icesink.tasks.carried_rows import (
    CarriedRows,
    carried_columns,
    fill_from_key,
    in_order,
    joined,
    present_positions,
)
from icesink.tasks.connect_payloads import Readers
from icesink.tasks.connect_rows import SchemaRows
from icesink.tasks.dead_letters import ENVELOPE
from icesink.tasks.decode_json import DECLINED, DeclinedValueError


@dataclass(frozen=True)
class DirectConnect:
    """A table's share of the direct job when its records are Connect JSON: the table's columns
    (Spark's types, for the schemas' check) and its Debezium envelope, if its records are change
    events; pickled into the tasks."""

    table: StructType
    envelope: EnvelopeSpec | None = None


def reader(text: bytes, decoder: DirectConnect) -> SchemaRows | None:
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
    return SchemaRows(schema.root, decoder.table, decoder.envelope)


Payload = tuple[SchemaRows | None, dict[str, Any] | None]  # a record's reader and payload (None, None: no row)


def _columns(payloads: Sequence[Payload], table: StructType) -> list[pa.Array]:
    """The rows of `payloads`, in their order, as the table's columns (a row of nulls where there
    is no reader), a schema's records at a time."""
    groups: dict[int, tuple[SchemaRows | None, list[int]]] = {}
    for i, (schema_rows, _) in enumerate(payloads):
        groups.setdefault(id(schema_rows), (schema_rows, []))[1].append(i)
    parts = []
    for schema_rows, at in groups.values():
        if schema_rows is None:
            arrays = [pa.nulls(len(at), to_arrow_type(f.dataType)) for f in table.fields]
        else:
            arrays = schema_rows.columns([payloads[i][1] for i in at])  # type: ignore[misc]
        parts.append(pa.Table.from_arrays([pa.array(at, pa.int64()), *arrays], names=["i", *table.names]))
    rows = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    if len(parts) > 1:
        rows = rows.take(pc.sort_indices(rows.column("i")))
    return [c.combine_chunks() for c in rows.columns[1:]]


class ConnectRows(CarriedRows):
    """One table's rows from Connect JSON records, as tasks/plain_rows.DirectRows takes plain
    JSON ones (`add` a record at a time, `add_whole` a batch at a time, `take` the rows as Arrow),
    with the same `carry` and `key_column`. With `key_decoder`, the record keys are Connect JSON
    too: the key column holds their payloads' structs, and a key column of the table's (`keys`)
    that a row lacks takes the record key's field of that name, as Spark's path fills it
    (changes.classify)."""

    def __init__(
        self, decoder: DirectConnect, carry: bool = False, key_column: str | None = None,
        key_decoder: DirectConnect | None = None, keys: Sequence[str] = (),
    ) -> None:  # fmt: skip
        super().__init__(carry, key_column)
        self._decoder = decoder
        self._readers = Readers(lambda text: reader(text, decoder))
        self._payloads: list[Payload] = []
        # Batches read whole (`_parsed_all`): each the payload of `_payloads` it goes before, its
        # columns and which of its rows are tombstones.
        self._parsed: list[tuple[int, list[pa.Array], list[bool]]] = []
        self._key_decoder = key_decoder
        self._key_readers = Readers(lambda text: reader(text, key_decoder)) if key_decoder is not None else None
        self._from_key = [
            k for k in keys if k != key_column and key_decoder is not None and k in key_decoder.table.names
        ]

    parses = True  # its batches may be read whole (tasks/json_batches.py)

    @property
    def rows(self) -> int:
        return len(self._payloads) + sum(len(tombstones) for _, _, tombstones in self._parsed)

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
        if found is None or not found[0].takes(found[1]):
            return False  # not a row: a dead letter where `letter` says so
        self._payloads.append(found)
        return True

    def letter(self, value: bytes, key: bytes | None) -> tuple[str, str, str] | None:
        """A change event `add` did not take, Spark's path's dead letter of it when beyond doubt:
        of a schema the table takes, with no op, an op Debezium does not write or no row image, and
        nothing else of it another error there (`SchemaRows.letter`), nor its record key (a key
        column's evolution). None otherwise, and for a record of a table without an envelope."""
        found = self._readers.payload(value) if self._decoder.envelope is not None else None
        why = found[0].letter(found[1]) if found is not None else None
        if why is not None and self._key_decoder is not None and key is not None:
            try:
                self._key_structs([key], self._key_decoder)
            except DECLINED:
                return None
        return (*ENVELOPE, why) if why is not None else None

    def _parsed_all(self, values: Sequence[bytes | None]) -> bool:
        """Takes a batch whose records all carry one schema, laid out as JsonConverter writes them,
        read whole (tombstones too, where the table takes them: rows of nulls)."""
        present = [v for v in values if v is not None]
        if not present or (len(present) < len(values) and not (self._carry and self._key_column is not None)):
            return False
        found = self._readers.payloads(present)
        columns = found[0].parsed(found[1]) if found is not None else None
        if columns is None:
            return False
        if len(present) < len(values):
            index = present_positions(values)
            columns = [c.take(index) for c in columns]  # a tombstone's row: nulls
        self._parsed.append((len(self._payloads), columns, [v is None for v in values]))
        return True

    def _columns_of(self) -> tuple[list[pa.Array], list[bool]]:
        """The table's columns of the rows taken since the last call, in the order they came (the
        records taken one at a time a schema at a time, the batches read whole as read), and
        which rows are tombstones."""
        payloads, self._payloads = self._payloads, []
        parsed, self._parsed = self._parsed, []
        table = self._decoder.table

        def between(start: int, end: int) -> tuple[list[pa.Array], list[bool]]:
            mine = payloads[start:end]
            return _columns(mine, table), [read is None for read, _ in mine]

        pieces = in_order([(at, (columns, flags)) for at, columns, flags in parsed], len(payloads), between)
        return joined([columns for columns, _ in pieces], len(table)), [t for _, flags in pieces for t in flags]

    def take(self) -> pa.RecordBatch | None:
        """The rows taken since the last call (see DirectRows.take)."""
        if not self._payloads and not self._parsed:
            return None
        table = self._decoder.table
        # A tombstone is a row of nulls: its key column is set from the key after.
        arrays, tombstones = self._columns_of()
        carried = self._carried()
        keys: Sequence[bytes | None] | pa.Array
        keys, self._keys = self._keys, []
        if self._key_decoder is not None:
            keys = self._key_structs(keys, self._key_decoder)
            fill_from_key(arrays, table.names, keys, self._from_key)
        return carried_columns(arrays, list(table.names), self._key_column, keys, carried, tombstones)

    def _key_structs(self, keys: Sequence[bytes | None], decoder: DirectConnect) -> pa.Array:
        """The record keys' payloads as the key column's structs (null for a null key), read whole
        where they may be; raises DeclinedValueError for a key that is not Connect JSON fitting the
        column (Spark's path: a key error, a dead letter)."""
        assert self._key_readers is not None
        present = [k for k in keys if k is not None]
        found = self._key_readers.payloads(present)
        columns = found[0].parsed(found[1]) if found is not None else None
        if columns is not None and len(present) < len(keys):
            index = present_positions(keys)
            columns = [c.take(index) for c in columns]
        if columns is None:
            payloads = [self._key_readers.payload(k) if k is not None else (None, None) for k in keys]
            if any(p is None for p in payloads):
                raise DeclinedValueError("a record key that is not Connect JSON of the key column's fields")
            columns = _columns([p for p in payloads if p is not None], decoder.table)
        return pa.StructArray.from_arrays(
            columns, fields=[pa.field(f.name, c.type) for f, c in zip(decoder.table.fields, columns, strict=True)],
            mask=pa.array([k is None for k in keys], pa.bool_()),
        )  # fmt: skip
