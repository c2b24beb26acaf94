"""What a one-pass task's JSON rows carry beside their values (tasks/plain_rows.py's plain JSON,
tasks/decode_connect.py's Connect JSON): with a table of changes, each row's Kafka coordinates and
whether it is a tombstone; with a record key column, the record key. Pure: no Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

# The column of a table of changes' rows saying which are tombstones (deletes of their record key).
TOMBSTONE = "__icesink_tombstone"

T = TypeVar("T")  # a piece of a table's rows (`in_order`)


class CarriedRows:
    """What a JSON table's rows carry beside their values, taken a record (`add`) or a batch
    (`add_all`) at a time: with `carry`, each row's Kafka coordinates (the tombstone flags are the
    subclass's); with `key_column`, its record key. A subclass takes the values (`_row`)."""

    def __init__(self, carry: bool, key_column: str | None) -> None:
        self._carry = carry
        self._key_column = key_column
        self._coordinates: list[tuple[str, int, int]] = []
        self._coordinate_columns: list[tuple[pa.Array, pa.Array, pa.Array]] = []  # `add_all`'s
        self._keys: list[bytes | None] = []

    def _row(self, value: bytes | None, routed: bool = False) -> bool | None:
        """Takes the record's value, or says it is not one the table takes (False), or that it is
        another table's of a field-routed topic (None: passed over). `routed`: the record is the
        table's by its routing field (tasks/json_records.py looked)."""
        raise NotImplementedError

    def add(
        self, value: bytes | None, coordinates: tuple[str, int, int] | None = None, key: bytes | None = None,
        routed: bool = False,
    ) -> bool:  # fmt: skip
        """Takes the record's row (and, with `carry`, its topic, partition and offset; with
        `key_column`, its key); False (and nothing taken) when the record is not one of the
        table's rows (see the subclass), nor a tombstone this table takes. True, and nothing
        taken, for a record of a field-routed topic that is another table's."""
        taken = self._row(value, routed)
        if taken is None:
            return True
        if not taken:
            return False
        if self._carry:
            assert coordinates is not None
            self._coordinates.append(coordinates)
        if self._key_column is not None:
            self._keys.append(key)
        return True

    def add_all(
        self, values: Sequence[bytes | None], coordinates: tuple[pa.Array, pa.Array, pa.Array] | None = None,
        keys: Sequence[bytes | None] | None = None,
    ) -> bool:  # fmt: skip
        """`add` for every record of a batch the table takes whole: their coordinates as the batch's
        own columns (topic, partition, offset), not a tuple per record. False, and none of the
        batch taken, when one is not taken (the caller declines the table, or takes the batch a
        record at a time with its dead letters), or is another table's (a field-routed table's
        records are taken one at a time)."""
        if self.add_whole(values, coordinates, keys):
            return True
        row = self._row
        mark = self._mark()
        for value in values:
            if not row(value):
                self._rollback(mark)
                return False
        self._carry_all(coordinates, keys)
        return True

    def add_whole(
        self, values: Sequence[bytes | None], coordinates: tuple[pa.Array, pa.Array, pa.Array] | None = None,
        keys: Sequence[bytes | None] | None = None,
    ) -> bool:  # fmt: skip
        """`add_all` where the subclass parses the batch whole; else False and nothing taken (the
        caller takes the records one at a time)."""
        if not self._parsed_all(values):
            return False
        self._carry_all(coordinates, keys)
        return True

    def _carry_all(
        self, coordinates: tuple[pa.Array, pa.Array, pa.Array] | None, keys: Sequence[bytes | None] | None
    ) -> None:
        if self._carry:
            assert coordinates is not None
            self._tuples_as_columns()
            self._coordinate_columns.append(coordinates)
        if self._key_column is not None:
            assert keys is not None
            self._keys += keys

    def add_parsed(self, values: Sequence[bytes | None]) -> bool:
        """Takes every value of a batch of an append table at once (`parsed_columns`), or none
        (False): the caller then takes them a record at a time."""
        return not self._carry and self._key_column is None and self._parsed_all(values)

    def letter(self, value: bytes, key: bytes | None) -> tuple[str, str, str] | None:
        """Spark's path's dead letter (stage, class, message) of a record `add` did not take, when
        the subclass knows it beyond doubt; None when it does not (the caller declines the table)."""
        return None

    def _parsed_all(self, values: Sequence[bytes | None]) -> bool:
        """Takes every value of a batch at once where the subclass can (its tombstone flags too,
        not the coordinates and keys); False, and nothing taken, where it cannot."""
        return False

    def _mark(self) -> Any:
        """Where the subclass's rows stand (`_rollback` goes back there)."""
        raise NotImplementedError

    def _rollback(self, mark: Any) -> None:
        """Drops the rows taken since `_mark` (a batch `add_all` did not take whole)."""
        raise NotImplementedError

    def _carried(self) -> Any:
        """The coordinates taken since the last call (tuples, or columns), None without `carry`."""
        if self._coordinate_columns:
            self._tuples_as_columns()
        carried = concatenated(self._coordinate_columns) if self._coordinate_columns else self._coordinates
        self._coordinates, self._coordinate_columns = [], []
        return carried if self._carry else None

    def _tuples_as_columns(self) -> None:
        """The coordinates taken a record at a time so far as columns, after those before: a table
        whose records come both ways (a batch taken whole, the next a record at a time) keeps them
        in the order its rows came."""
        if self._coordinates:
            topics, partitions, offsets = zip(*self._coordinates, strict=True)
            self._coordinate_columns.append((pa.array(topics), pa.array(partitions), pa.array(offsets)))
            self._coordinates = []


def in_order(parsed: Sequence[tuple[int, T]], taken: int, between: Callable[[int, int], T]) -> list[T]:
    """The pieces of a table's rows in the order they came: the batches taken whole (`parsed`, each
    with how many rows taken one at a time came before it) among the `taken` rows taken one at a
    time, of which `between(start, end)` makes the pieces between the batches."""
    pieces: list[T] = []
    at = 0
    for position, piece in parsed:
        if position > at:
            pieces.append(between(at, position))
        pieces.append(piece)
        at = position
    if at < taken:
        pieces.append(between(at, taken))
    return pieces


def joined(pieces: Sequence[Sequence[pa.Array]], width: int) -> list[pa.Array]:
    """The table's `width` columns of its rows' pieces (`in_order`), one array each."""
    if len(pieces) == 1:
        return list(pieces[0])
    return [pa.concat_arrays([p[k] for p in pieces]) for k in range(width)]


def concatenated(columns: list[tuple[pa.Array, pa.Array, pa.Array]]) -> tuple[pa.Array, pa.Array, pa.Array]:
    """The topic, partition and offset columns of several batches, one each, in the types
    `carried_columns` gives them."""
    types = (pa.string(), pa.int32(), pa.int64())
    topics, partitions, offsets = (pa.concat_arrays([c[k].cast(types[k]) for c in columns]) for k in range(3))
    return topics, partitions, offsets


def fill_from_key(arrays: list[pa.Array], names: Sequence[str], keys: pa.Array, columns: Sequence[str]) -> None:
    """Fills, in `arrays` (the table's columns, `names`), the rows of each of `columns` (key
    columns of the table's) that lack a value with the record key's field of that name (`keys`:
    the keys' structs), as Spark's path fills them (changes.classify)."""
    for name in columns:
        at = names.index(name)
        arrays[at] = pc.coalesce(arrays[at], pc.struct_field(keys, name).cast(arrays[at].type))


def carried_columns(
    arrays: list[pa.Array], names: list[str], key_column: str | None, keys: Sequence[bytes | None] | pa.Array,
    coordinates: Sequence[tuple[str, int, int]] | tuple[pa.Array, pa.Array, pa.Array] | None,
    tombstones: Sequence[bool],
) -> pa.RecordBatch:  # fmt: skip
    """A table's decoded columns with what a JSON decoder carries beside them: the record key in
    `key_column` (as a string, or as decoded already), and with `coordinates` each row's topic,
    partition and offset and whether it is a tombstone before the table's columns (a table of
    changes orders by them)."""
    if key_column is not None:
        # Spark's path casts the key bytes to a string; UTF-8 that does not decode is left to it.
        decoded = keys if isinstance(keys, pa.Array) else pa.array(keys, pa.binary()).cast(pa.string())
        arrays[names.index(key_column)] = decoded
    if coordinates is not None:
        if isinstance(coordinates, tuple) and isinstance(coordinates[0], pa.Array):
            carried = [*coordinates, pa.array(tombstones, pa.bool_())]  # columns already (`add_all`)
        else:
            topics, partitions, offsets = zip(*coordinates, strict=True)
            carried = [
                pa.array(topics, pa.string()),
                pa.array(partitions, pa.int32()),
                pa.array(offsets, pa.int64()),
                pa.array(tombstones, pa.bool_()),
            ]
        arrays, names = [*carried, *arrays], ["topic", "partition", "offset", TOMBSTONE, *names]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def present_positions(values: Sequence[bytes | None]) -> pa.Array:
    """Each value's row among the values present (null for a missing one: a tombstone's row of
    nulls, taken from the rows read of the others)."""
    at, positions = 0, []
    for v in values:
        positions.append(at if v is not None else None)
        at += v is not None
    return pa.array(positions, pa.int64())
