"""A one-pass task's JSON records into their tables a batch at a time, a topic at a time
(a reader's batch may hold several topics); tasks/json_records.py takes the rest a record at a
time, which decides each record as before.

A topic whose records all go to its tables (not routed by a field) takes its batch whole when
its tables take every offset of the batch: its one table as the job's one JSON table does
(add_whole: plain objects or change events, of a table of changes, keys and tombstones too;
Connect JSON, tasks/decode_connect.py), several when each is a plain JSON append table: each table's rows are parsed
at once (decode_json.parsed_columns, which takes only rows the record-at-a-time decoder makes
alike), once for tables of the same columns.

A field-routed topic's routing field is read for the whole batch by Arrow's JSON reader: where
the topic's tables have the same columns, from one parse of the batch with them; else alone
(decode_json.parsed_field), each table's records then parsed with its columns. The values are
spelled as Spark's cast spells them (tasks/routing.py), and judged a batch at a time. A value's
records are taken so only when every table of the value takes them as above; a record whose
field holds no value, a value the tasks cannot spell, any record either read refuses, sends the
topic's batch the record-at-a-time way. Records of a value no table takes (another's, a dead
letter of the routing) are left to that way too. The rows taken whole come before those the
other way takes in the same batch: an append table's rows have no order. Pure: no Spark.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from icesink.tasks.decode_json import DirectColumn, parsed_columns, parsed_field
from icesink.tasks.plain_rows import DirectRows
from icesink.tasks.route_judges import Judges
from icesink.tasks.routing import RouteFilter, json_object_once, routable, spelled_column
from icesink.tasks.table_out import ORDER, TableOut


@dataclass(frozen=True)
class ByValue:
    """The tables of a field-routed topic by the routing field's value: a record goes to those of
    its value only, its field read once (not by each table in turn)."""

    route: RouteFilter  # the field (the values: none)
    by_value: dict[str, list[int]]

    @classmethod
    def of(cls, tables: list[int], outs: Mapping[int, TableOut]) -> ByValue | None:
        routes = {i: outs[i].table.route for i in tables if i in outs}
        fields = {r.field if r is not None else None for r in routes.values()}
        if len(fields) != 1 or None in fields:
            return None
        by_value: dict[str, list[int]] = defaultdict(list)
        for i, r in routes.items():
            assert r is not None
            for v in r.values:
                by_value[v].append(i)
        field = fields.pop()
        assert field is not None
        return cls(RouteFilter(field, frozenset()), dict(by_value))

    def tables(self, value: bytes | None) -> list[int] | None:
        """The tables that take the record; None when each table must look (not a JSON object, a
        field the tasks cannot spell as Spark would)."""
        found = json_object_once(value) if value is not None else None
        if found is None:
            return None
        spelled = self.route.spelled(found)
        if spelled is False:
            return None
        return self.by_value.get(spelled, NONE) if spelled is not None else NONE


NONE: list[int] = []


def taken_whole(
    batch: pa.RecordBatch, by_topic: Mapping[str, list[int]], routed: Mapping[str, ByValue],
    outs: Mapping[int, TableOut], judges: Judges | None,
) -> pa.RecordBatch:  # fmt: skip
    """Takes the records of `batch` that their tables (`by_topic`; by the routing field's value for
    the `routed` topics) can take a batch at a time, and judges the routed ones (`judges`); the
    records left, in their order (all of them when none was taken)."""
    if not len(batch):
        return batch
    taken: list[pa.Array] = []
    for topic, at in _topics(batch.column("topic")):
        mine = batch if at is None else batch.take(at)
        by_value = routed.get(topic)
        if by_value is not None:
            found = _routed_whole(mine, topic, by_value, outs, judges)
            if found is not None:
                if at is None:
                    return batch.filter(pc.invert(found))
                taken.append(at.filter(found))
        elif (judges is None or not judges.judges(topic)) and _topic_whole(
            mine, topic, by_topic.get(topic, NONE), outs
        ):  # a judged topic is field-routed: its records are judged above or a record at a time
            if at is None:
                return batch.slice(0, 0)
            taken.append(at)
    if not taken:
        return batch
    done = pc.is_in(pa.array(range(len(batch)), pa.int64()), value_set=pa.concat_arrays(taken))
    return batch.filter(pc.invert(done))


def _topics(topics: pa.Array) -> list[tuple[str, pa.Array | None]]:
    """Each topic of a batch and its records' positions, ascending (None: the batch is one topic's)."""
    first = topics[0].as_py()
    if pc.all(pc.equal(topics, first)).as_py():
        return [(first, None)]
    positions = pa.table({"t": topics, "i": pa.array(range(len(topics)), pa.int64())})
    found = positions.group_by("t", use_threads=False).aggregate([("i", "list")]).to_pydict()
    return sorted((t, pa.array(sorted(at), pa.int64())) for t, at in zip(found["t"], found["i_list"], strict=True))


def _topic_whole(batch: pa.RecordBatch, topic: str, tables: list[int], outs: Mapping[int, TableOut]) -> bool:
    """A topic's records taken a batch at a time by each of its tables (not field-routed): a
    topic's one table as the job's one JSON table takes them (changes, keys and tombstones too),
    several only if each is a plain JSON append table."""
    mine = [out for i in tables if (out := outs.get(i)) is not None]
    if not mine:
        return False
    covered = _covered(batch)
    if len(mine) == 1 and mine[0].rows is not None and mine[0].rows.parses and _within(mine[0], topic, covered):
        table = mine[0].table
        coordinates = tuple(batch.column(n) for n in ORDER) if table.changes is not None else None
        keys = batch.column("key").to_pylist() if table.key_column is not None else None
        return mine[0].rows.add_whole(batch.column("value").to_pylist(), coordinates, keys)
    if batch.column("value").null_count:
        return False
    whole = [_whole(out) if _within(out, topic, covered) else None for out in mine]
    if None in whole:
        return False
    records = batch.column("value").to_pylist()
    parsed: dict[tuple[DirectColumn, ...], list[pa.Array] | None] = {}
    for rows in whole:
        assert rows is not None
        if rows.columns not in parsed:
            parsed[rows.columns] = parsed_columns(rows.columns, records)
        if parsed[rows.columns] is None:
            return False
    for rows in whole:
        assert rows is not None
        columns = parsed[rows.columns]
        assert columns is not None
        rows.add_columns(columns)
    return True


def _routed_whole(
    batch: pa.RecordBatch, topic: str, by_value: ByValue, outs: Mapping[int, TableOut], judges: Judges | None
) -> pa.Array | None:
    """A field-routed topic's records taken a batch at a time: which were (a mask), or None when
    the topic's batch is left to the record-at-a-time way."""
    field = by_value.route.field
    whole = _whole_tables(by_value, outs, topic, batch)
    values = [v for v, tables in by_value.by_value.items() if all(i in whole for i in tables)]
    kinds = {rows.columns[_at(rows, field)].arrow_type for rows in whole.values()}
    if not values or len(kinds) != 1 or not routable(kind := kinds.pop()) or batch.column("value").null_count:
        return None
    raw = batch.column("value")
    records = raw.to_pylist()
    # Tables of the same columns (a topic's routed tables mostly are) share one parse of the batch.
    shared = {rows.columns for rows in whole.values()}
    once = parsed_columns(next(iter(shared)), records) if len(shared) == 1 else None
    read = (
        once[_at(next(iter(whole.values())), field)]
        if once is not None
        else parsed_field(pa.field(field, kind), records)
    )
    if read is None or read.null_count:
        return None
    spelled = spelled_column(read)
    taken = pc.is_in(spelled, value_set=pa.array(values, pa.string()))
    parsed: list[tuple[DirectRows, list[pa.Array]]] = []
    for i, rows in whole.items():
        route = outs[i].table.route
        assert route is not None
        mine = pc.and_(taken, pc.is_in(spelled, value_set=pa.array(sorted(route.values), pa.string())))
        if not pc.any(mine).as_py():
            continue
        if once is not None:
            parsed.append((rows, [c.filter(mine) for c in once]))
            continue
        columns = parsed_columns(rows.columns, raw.filter(mine).to_pylist())
        # The table's own reading of the field must route its rows as the field's reading did.
        if columns is None or not spelled_column(columns[_at(rows, field)]).equals(spelled.filter(mine)):
            return None
        parsed.append((rows, columns))
    for rows, columns in parsed:
        rows.add_columns(columns)
    if judges is not None:
        at = batch.column("partition").filter(taken), batch.column("offset").filter(taken)
        judges.counted(topic, spelled.filter(taken), *at)
    return taken


def _whole_tables(
    by_value: ByValue, outs: Mapping[int, TableOut], topic: str, batch: pa.RecordBatch
) -> dict[int, DirectRows]:
    """The topic's tables that take its records a batch at a time, each every offset of `batch`
    (the record-at-a-time way passes over the others), by their index."""
    covered = _covered(batch)
    found = {}
    for i in sorted({i for tables in by_value.by_value.values() for i in tables}):
        out = outs.get(i)
        rows = _whole(out, by_value.route.field) if out is not None and _within(out, topic, covered) else None
        if rows is not None:
            found[i] = rows
    return found


def _whole(out: TableOut, field: str | None = None) -> DirectRows | None:
    """The table's rows when they take its records a batch at a time: a plain JSON append table's;
    with `field`, of a field-routed topic and with that column, but not a table of columns
    `schema` and `payload` (a routing judge leaves such records to Spark's pass: they may be
    Connect JSON)."""
    rows = out.rows
    if not isinstance(rows, DirectRows) or not rows.takes_parsed or rows.routed != (field is not None):
        return None
    names = {c.name for c in rows.columns}
    return rows if field is None or (field in names and not {"schema", "payload"} <= names) else None


def _at(rows: DirectRows, field: str) -> int:
    return [c.name for c in rows.columns].index(field)


def _covered(batch: pa.RecordBatch) -> dict[int, tuple[int, int]]:
    """Each partition's first and last offset in `batch`."""
    found = pa.table({"p": batch.column("partition"), "o": batch.column("offset")})
    grouped = found.group_by("p").aggregate([("o", "min"), ("o", "max")]).to_pydict()
    return dict(zip(grouped["p"], zip(grouped["o_min"], grouped["o_max"], strict=True), strict=True))


def _within(out: TableOut, topic: str, covered: Mapping[int, tuple[int, int]]) -> bool:
    """Whether the table takes every offset of the batch (the per-record way skips the others)."""
    for partition, (low, high) in covered.items():
        first, last = out.table.takes.get((topic, partition), (1, 0))
        if not first <= low <= high <= last:
            return False
    return True
