"""One table's rows of plain JSON records, gathered in a one-pass task (tasks/table_out.py) a
batch at a time where Arrow's JSON reader takes the batch whole, else a record at a time, and
taken as Arrow columns, each value checked by tasks/decode_json.py. What the rows carry beside
their values (coordinates, tombstones, record keys) is tasks/carried_rows.py's.

Debezium change events without Connect schemas (JsonConverter with schemas off) are plain JSON
too (`PlainEnvelope`): the row is the event's image (`after`, `before` for a delete) with the
operation and source columns, as schema/envelope.py says; both images are checked against the
table's columns. An event Spark's path makes a dead letter of (no op, another op, no image) is
not a row: it is that letter here too, in its words, where nothing else of it could change the
table (`letter`), else it declines. A batch of events is parsed whole where Arrow's reader takes
it (tasks/plain_changes.py).
Plain JSON record keys (`decode.key_format: json`) fill the key column's struct (`DirectRows`'
`key`). Pure: no Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from icesink.schema.envelope import OPS, SOURCE_PREFIX, EnvelopeSpec
from icesink.tasks.carried_rows import (
    CarriedRows,
    carried_columns,
    fill_from_key,
    in_order,
    joined,
    present_positions,
)
from icesink.tasks.dead_letters import ENVELOPE, event_problem, json_problem
from icesink.tasks.decode_json import (
    DECLINED,
    DeclinedValueError,
    DirectColumn,
    check,
    checked_array,
    json_object,
    parsed_columns,
)
from icesink.tasks.json_shape import JsonShape
from icesink.tasks.plain_changes import parsed_changes
from icesink.tasks.routing import RouteFilter, json_object_once


@dataclass(frozen=True)
class PlainEnvelope:
    """A table's share of the direct job when its records are Debezium change events in plain
    JSON: the table's columns (`direct_columns`) and the envelope's; pickled into the tasks."""

    columns: tuple[DirectColumn, ...]
    envelope: EnvelopeSpec


class DirectRows(CarriedRows):
    """One table's rows, from the records `add` takes, as Arrow columns (`take`). With `carry`,
    each row keeps the Kafka coordinates `add` was given and whether it is a tombstone (a table of
    changes orders by them). With `key_column`, that column holds the record key: as a string
    (`decode.key_format: string`), or with `key` (a plain JSON record key's struct column) as the
    struct of its JSON object, and a key column of the table's (`keys`) that a row lacks takes the
    record key's field of that name, as Spark's path fills it (changes.classify). With `carry`, a
    record without a value is then a tombstone: a row of only its key. With `envelope`, each
    record is a Debezium change event (`PlainEnvelope`). With `shape`, a record's object is
    flattened or matched to the columns ignoring case first (tasks/json_shape.py). With `route`,
    the records are of field-routed topics, and a record the table does not take is passed over
    (tasks/routing.py)."""

    def __init__(
        self, columns: Sequence[DirectColumn], carry: bool = False, key_column: str | None = None,
        envelope: EnvelopeSpec | None = None, key: DirectColumn | None = None, keys: Sequence[str] = (),
        shape: JsonShape | None = None, route: RouteFilter | None = None,
    ) -> None:  # fmt: skip
        super().__init__(carry, key_column)
        self._route = route
        self._shape = shape  # a flattened or case-insensitive table's (tasks/json_shape.py)
        self._columns = tuple(columns)
        self._names = frozenset(c.name for c in columns)
        self._order = tuple(c.name for c in columns)
        self._rows: list[tuple[Any, ...]] = []
        # Batches parsed whole (`_parsed_all`): each the row of `_rows` it goes before, and its columns.
        self._parsed: list[tuple[int, list[pa.Array]]] = []
        # A table's plain JSON objects or change events are parsed whole here, not shaped or routed
        # records (a field-routed topic's are parsed whole where its routing is, tasks/json_batches.py).
        self._parses = shape is None and route is None
        self._tombstones: list[bool] = []
        self._nothing = tuple(None for _ in columns)
        self._key = key
        fields = {f.name for f in key.fields} if key is not None else set()
        self._from_key = [k for k in keys if k != key_column and k in fields and k in self._names]
        self._envelope = envelope
        if envelope is not None:
            synthetic = envelope.synthetic()
            self._image = self._names - synthetic - {key_column}
            self._sources = [
                (n, n[len(SOURCE_PREFIX) :]) for n in self._order if n in synthetic and n.startswith(SOURCE_PREFIX)
            ]
            self._other_images: list[dict[str, Any]] = []  # the images the rows do not take, checked too

    @property
    def columns(self) -> tuple[DirectColumn, ...]:
        return self._columns

    @property
    def routed(self) -> bool:
        """Whether the table's records are of field-routed topics."""
        return self._route is not None

    @property
    def parses(self) -> bool:
        """Whether the table's batches may be parsed whole (`add_whole`): not shaped or routed."""
        return self._parses

    @property
    def takes_parsed(self) -> bool:
        """Whether a caller may hand the table rows it parsed whole (`add_columns`): a plain JSON
        append table's (of a field-routed topic, the caller routes the records)."""
        plain = self._envelope is None and self._shape is None and self._key is None
        return plain and not self._carry and self._key_column is None

    def add_columns(self, columns: list[pa.Array]) -> None:
        """Takes the rows of records parsed whole with the table's columns
        (`decode_json.parsed_columns`: tasks/json_batches.py)."""
        assert self.takes_parsed
        self._parsed.append((len(self._rows), columns))

    @property
    def rows(self) -> int:
        return len(self._rows) + sum(len(columns[0]) for _, columns in self._parsed)

    def _parsed_all(self, values: Sequence[bytes | None]) -> bool:
        if not self._parses:
            return False
        # A record without a value is a tombstone where the table takes them (a row of only its key).
        tombstones = self._carry and self._key_column is not None
        present = [v for v in values if v is not None]
        if len(present) < len(values) and not tombstones:
            return False
        if self._envelope is None:
            parsed = parsed_columns(self._columns, present)
        else:
            parsed = parsed_changes(self._columns, self._envelope, frozenset(self._image), present)
        if parsed is None:
            return False
        if len(present) < len(values):
            index = present_positions(values)
            parsed = [a.take(index) for a in parsed]  # a tombstone's row: nulls
        self._parsed.append((len(self._rows), parsed))
        if self._carry:
            self._tombstones += [v is None for v in values]
        return True

    def _mark(self) -> tuple[int, int, int]:
        return len(self._rows), len(self._tombstones), len(self._other_images) if self._envelope is not None else 0

    def _rollback(self, mark: tuple[int, int, int]) -> None:
        rows, tombstones, others = mark
        del self._rows[rows:], self._tombstones[tombstones:]
        if self._envelope is not None:
            del self._other_images[others:]

    def _columns_of(self) -> list[pa.Array]:
        """The table's columns of the rows taken since the last call, in the order they came: the
        records taken one at a time checked a column at a time, the batches parsed whole as parsed."""
        rows, self._rows = self._rows, []
        parsed, self._parsed = self._parsed, []
        pieces = in_order(parsed, len(rows), lambda start, end: self._checked(rows[start:end]))
        return joined(pieces, len(self._columns))

    def _checked(self, rows: list[tuple[Any, ...]]) -> list[pa.Array]:
        return [checked_array(c, v) for c, v in zip(self._columns, zip(*rows, strict=True), strict=True)]

    def _row(self, value: bytes | None, routed: bool = False) -> bool | None:
        """Takes the record's row (and with `carry` whether it is a tombstone), or says it is not a
        JSON object of the table's columns (or a change event of them), or (None) that it is
        another table's; its values' types are checked by `take`."""
        if value is None and self._carry and self._key_column is not None:
            if self._route is not None:
                return None  # a tombstone has no routing field: no table's (the routing pass says so)
            self._rows.append(self._nothing)
            tombstone = True
        else:
            found = json_object(value) if self._route is None else json_object_once(value)
            if found is not None and self._route is not None and not routed:
                verdict = self._route.verdict(found)
                if verdict is not True:
                    return verdict
            if found is not None and self._envelope is not None:
                found = self._change(found, self._envelope)
            if found is not None and self._shape is not None:
                found = self._shape.row(found)
            if found is None or not self._names.issuperset(found):
                return False
            get = found.get
            self._rows.append(tuple([get(n) for n in self._order]))
            tombstone = False
        if self._carry:
            self._tombstones.append(tombstone)
        return True

    def _change(self, event: dict[str, Any], envelope: EnvelopeSpec) -> dict[str, Any] | None:
        """The row of a change event (the image, the operation and source columns), or None when
        Spark's path would not make that row: no op Debezium writes, no image, an image or source
        that is not an object, an image field the table lacks (either image)."""
        op = event.get("op")
        code = OPS.get(op) if type(op) is str else None
        image, other = (
            (event.get("before"), event.get("after")) if op == "d" else (event.get("after"), event.get("before"))
        )
        source = event.get("source")
        if code is None or type(image) is not dict or not self._image.issuperset(image):
            return None
        if (other is not None and (type(other) is not dict or not self._image.issuperset(other))) or (
            source is not None and type(source) is not dict
        ):
            return None
        if other:
            self._other_images.append(other)
        row = {**image, envelope.operation_column: code}
        if source:
            row.update((column, source.get(name)) for column, name in self._sources)
        return row

    def letter(self, value: bytes, key: bytes | None) -> tuple[str, str, str] | None:
        """A record `add` did not take, Spark's path's dead letter of it when beyond doubt: a value
        not JSON or not an object (tasks/dead_letters.json_problem), or a change event with no op,
        an op Debezium does not write, or no row image (dead_letters.event_problem), where nothing
        else of it could change the table there (`_fits`). None otherwise."""
        found = json_problem(value)
        if found is not None or self._envelope is None:
            return found
        event = json_object(value)
        why = event_problem(event) if event is not None else None
        return (*ENVELOPE, why) if why is not None and event is not None and self._fits(event, key) else None

    def _fits(self, event: dict[str, Any], key: bytes | None) -> bool:
        """Whether nothing of a change event that is a dead letter could change the table on
        Spark's path, whose inference reads its fields too: its images and source are objects of
        the table's columns, their values and its record key each of its column's type."""
        images = (event.get("before"), event.get("after"))
        source = event.get("source")
        if type(source) not in (dict, type(None)):
            return False
        if not all(i is None or (type(i) is dict and self._image.issuperset(i)) for i in images):
            return False
        rows = [i for i in images if i] + ([{c: source.get(n) for c, n in self._sources}] if source else [])
        try:
            for c in self._columns:
                if any(c.name in r for r in rows):
                    checked_array(c, [r.get(c.name) for r in rows])
            if self._key is not None and key is not None:
                _key_structs(self._key, [key])
        except DECLINED:
            return False
        return True

    def take(self) -> pa.RecordBatch | None:
        """The rows taken since the last call as one Arrow batch (None if there are none); raises
        `DeclinedValueError` for a value not of its column's type (a record key not a JSON object
        of the key column's fields), and Arrow's error for one Arrow refuses (a key that is not
        UTF-8 too)."""
        if not self._rows and not self._parsed:
            return None
        arrays = self._columns_of()
        if self._envelope is not None:
            others, self._other_images = self._other_images, []
            for c in self._columns:
                if c.name in self._image and others:
                    check(c, [o.get(c.name) for o in others])
        keys: Sequence[bytes | None] | pa.Array
        keys, self._keys = self._keys, []
        if self._key is not None:
            keys = _key_structs(self._key, keys)
            fill_from_key(arrays, self._order, keys, self._from_key)
        tombstones, self._tombstones = self._tombstones, []
        return carried_columns(arrays, list(self._order), self._key_column, keys, self._carried(), tombstones)


def _key_structs(column: DirectColumn, keys: Sequence[bytes | None]) -> pa.Array:
    """Plain JSON record keys as the key column's structs (null for a null key), as Spark's path
    parses them with the column's type; DeclinedValueError for a key that is not a JSON object of
    the column's fields, each of its type (Spark's path: a key error or a wider key column)."""
    objects = [json_object(k) if k is not None else None for k in keys]
    if any(o is None and k is not None for o, k in zip(objects, keys, strict=True)):
        raise DeclinedValueError(column.name)
    return checked_array(column, objects)
