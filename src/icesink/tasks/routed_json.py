"""A field-routed topic's plain JSON records into their tables a batch at a time, in a one-pass task
(tasks/json_records.py takes the rest a record at a time).

The routing field of every record of the topic's batch is read at once by Arrow's JSON reader
(decode_json.parsed_field), spelled as Spark's cast spells it (tasks/routing.py), and each
table's records are parsed whole with its columns (decode_json.parsed_columns, which takes only
rows the record-at-a-time decoder makes alike); where the topic's tables have the same columns,
the batch is parsed once with them, the field read from that parse. A value's records are taken so only when every
table of the value takes plain JSON appends within the batch's offsets; a record whose field
holds no value, a value the tasks cannot spell, any record either read refuses, sends the topic's
whole batch the record-at-a-time way, which decides each record as before. Records of a value no
table takes (another's, a dead letter of the routing) are left to that way too. Pure: no Spark.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from icesink.tasks.decode_json import parsed_columns, parsed_field
from icesink.tasks.plain_rows import DirectRows
from icesink.tasks.route_judges import Judges
from icesink.tasks.routing import RouteFilter, json_object_once, routable, spelled_column
from icesink.tasks.table_out import TableOut


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
    batch: pa.RecordBatch, routed: Mapping[str, ByValue], outs: Mapping[int, TableOut], judges: Judges | None
) -> pa.RecordBatch:
    """Takes the records of `batch`'s field-routed topics (`routed`) that their tables can take a
    batch at a time, each topic's apart (a reader's batch may hold several), and judges them
    (`judges`); the records left, in their order (all of them when none was taken)."""
    if not routed or not len(batch):
        return batch
    topics = batch.column("topic")
    found_topics = pc.unique(topics).to_pylist()
    if len(found_topics) == 1:
        by_value = routed.get(found_topics[0])
        found = _topic_whole(batch, found_topics[0], by_value, outs, judges) if by_value is not None else None
        return batch if found is None else batch.filter(pc.invert(found))
    taken: pa.Array | None = None
    for topic in found_topics:
        by_value = routed.get(topic)
        if by_value is None:
            continue
        mine = pc.equal(topics, topic)
        found = _topic_whole(batch.filter(mine), topic, by_value, outs, judges)
        if found is not None:
            # The topic's records taken, at their places in the batch.
            at = pc.indices_nonzero(mine)
            placed = pc.is_in(pa.array(range(len(batch)), pa.uint64()), value_set=at.filter(found))
            taken = placed if taken is None else pc.or_(taken, placed)
    return batch if taken is None else batch.filter(pc.invert(taken))


def _topic_whole(
    batch: pa.RecordBatch, topic: str, by_value: ByValue, outs: Mapping[int, TableOut], judges: Judges | None
) -> pa.Array | None:
    """One topic's records taken a batch at a time: which were (a mask), or None when none was."""
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


def _whole(out: TableOut, field: str) -> DirectRows | None:
    """The table's rows when they take routed records a batch at a time: a plain JSON append
    table's, of a column `field`. Not a table of columns `schema` and `payload`: a routing judge
    leaves such records to Spark's pass (they may be Connect JSON)."""
    rows = out.rows
    if not isinstance(rows, DirectRows) or not rows.takes_routed_whole:
        return None
    names = {c.name for c in rows.columns}
    return rows if field in names and not {"schema", "payload"} <= names else None


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
