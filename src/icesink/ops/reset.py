"""Planning an offsets reset: where `icesink run` restarts each topic-partition. Pure.

The tables are the source of truth. `from-tables` restarts every topic-partition at the lowest
offset any table still needs (a replay below a table's offsets is dropped by the job, so nothing
doubles); the other modes move to Kafka's earliest or end offsets, or to a timestamp. A target
below what a table already holds would make the job re-read records it then drops: to really
re-ingest them, the rewind must be asked for, and lowers that table's offsets with an audit record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from enum import StrEnum

from icesink.model import Offsets, TableRef, TopicPartition


class Mode(StrEnum):
    FROM_TABLES = "from-tables"
    EARLIEST = "earliest"
    LATEST = "latest"
    TIMESTAMP = "timestamp"


@dataclass(frozen=True)
class Rewind:
    table: TableRef
    tp: TopicPartition
    held: int  # the table's committed next offset
    target: int


@dataclass(frozen=True)
class Skip:
    table: TableRef
    tp: TopicPartition
    held: int
    target: int

    @property
    def records(self) -> int:
        return self.target - self.held


@dataclass(frozen=True)
class ResetPlan:
    mode: Mode
    starting: Mapping[TopicPartition, int]  # where the job starts each topic-partition
    rewinds: tuple[Rewind, ...] = ()
    skips: tuple[Skip, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def spark_json(self) -> str:
        """startingOffsets in Spark's format: {"topic": {"partition": offset}}."""
        out: dict[str, dict[str, int]] = {}
        for tp, off in sorted(self.starting.items()):
            out.setdefault(tp.topic, {})[str(tp.partition)] = off
        return json.dumps(out, sort_keys=True)

    def lowered(self, table: TableRef, held: Offsets) -> Offsets:
        """The table's offsets after its rewinds."""
        out = dict(held)
        for r in self.rewinds:
            if r.table == table:
                out[r.tp] = r.target
        return out


def _target(
    mode: Mode, held: list[int], marks: tuple[int, int], at: int | None, notes: list[str], tp: TopicPartition,
    unseen: Mode,
) -> int:  # fmt: skip
    """Where `mode` restarts `tp`, before clamping to Kafka's log; `held`: the tables' offsets of `tp`;
    `unseen`: where from-tables starts a partition no table holds (earliest or latest)."""
    earliest, end = marks
    if mode is Mode.FROM_TABLES:
        if not held:
            return end if unseen is Mode.LATEST else earliest
        target = min(held)
        if max(held) > end:
            notes.append(
                f"{tp}: a table holds offset {max(held)} but Kafka's log ends at {end}: the topic was deleted and "
                f"recreated, or truncated; its new records stay unread until the table is rewound "
                f"(--topic {tp.topic} --to-earliest --rewind)"
            )
        if target < earliest:
            notes.append(
                f"{tp}: the tables need offset {target} but Kafka starts at {earliest}; "
                f"{earliest - target} record(s) were removed by retention before they landed"
            )
            return earliest
        return target
    if mode is Mode.EARLIEST:
        return earliest
    if mode is Mode.LATEST:
        return end
    return end if at is None else at


def _moves(
    tables: Mapping[TableRef, Offsets], starting: Mapping[TopicPartition, int]
) -> tuple[tuple[Rewind, ...], tuple[Skip, ...]]:
    """Per table and topic-partition: a start below what it holds (a rewind) or above it (a skip)."""
    rewinds = []
    skips = []
    for table, holds in sorted(tables.items()):
        for tp, off in sorted(holds.items()):
            if tp not in starting:
                continue
            if starting[tp] < off:
                rewinds.append(Rewind(table, tp, off, starting[tp]))
            elif starting[tp] > off:
                skips.append(Skip(table, tp, off, starting[tp]))
    return tuple(rewinds), tuple(skips)


def plan_reset(
    mode: Mode,
    tables: Mapping[TableRef, Offsets],
    marks: Mapping[TopicPartition, tuple[int, int]],
    at_timestamp: Mapping[TopicPartition, int] | None = None,
    unseen: Mode = Mode.EARLIEST,
) -> ResetPlan:
    """`marks`: (earliest, end) of every topic-partition the job subscribes to (and the reset
    covers); `at_timestamp`: the first offset at or after the timestamp, per topic-partition;
    `unseen`: where from-tables starts a partition no table holds."""
    starting: dict[TopicPartition, int] = {}
    notes: list[str] = []
    for tp, (earliest, end) in sorted(marks.items()):
        held = [o[tp] for o in tables.values() if tp in o]
        target = _target(mode, held, (earliest, end), (at_timestamp or {}).get(tp), notes, tp, unseen)
        starting[tp] = max(min(target, end), earliest)
    if mode is Mode.FROM_TABLES:
        # Tables ahead of the minimum drop what they already hold: nothing is re-ingested.
        return ResetPlan(mode, starting, (), (), tuple(notes))
    rewinds, skips = _moves(tables, starting)
    return ResetPlan(mode, starting, rewinds, skips, tuple(notes))


def with_others_from_tables(
    plan: ResetPlan, tables: Mapping[TableRef, Offsets], others: Mapping[TopicPartition, tuple[int, int]]
) -> ResetPlan:
    """`plan` (for the topics asked for) with the other topic-partitions restarting where the tables
    are: Spark needs a start for every partition it is assigned."""
    rest = plan_reset(Mode.FROM_TABLES, tables, others)
    return ResetPlan(plan.mode, {**rest.starting, **plan.starting}, plan.rewinds, plan.skips, rest.notes + plan.notes)


def start_lines(plan: ResetPlan, tables: Mapping[TableRef, Offsets], unseen: Mode) -> list[str]:
    """Per topic, where a start from the tables begins it: the partitions a table holds, at the
    lowest offset a table needs, and those no table holds (at `unseen`)."""
    held = {tp for offsets in tables.values() for tp in offsets}
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in sorted(plan.starting):
        by_topic.setdefault(tp.topic, []).append(tp)
    lines = []
    for topic, tps in by_topic.items():
        ours = [tp for tp in tps if tp in held]
        parts = []
        if ours:
            at = ", ".join(f"{tp.partition}@{plan.starting[tp]}" for tp in ours)
            parts.append(f"{len(ours)} partition(s) from the tables ({at})")
        if len(ours) < len(tps):
            parts.append(f"{len(tps) - len(ours)} at {unseen.value} (no table holds them)")
        lines.append(f"topic {topic}: " + "; ".join(parts))
    return lines


def only_tables(plan: ResetPlan, names: Set[str]) -> ResetPlan:
    """`plan` rewinding and skipping only the tables named (`--table`); the starts stay, as every
    table counts for where the job starts."""
    return ResetPlan(
        plan.mode,
        plan.starting,
        tuple(r for r in plan.rewinds if r.table.name in names),
        tuple(k for k in plan.skips if k.table.name in names),
        plan.notes,
    )


def refuse_rewinds(plan: ResetPlan) -> str | None:
    """The message refusing a plan that re-ingests records without --rewind, or None."""
    if not plan.rewinds:
        return None
    lines = [f"  {r.table} {r.tp}: holds up to {r.held}, reset to {r.target}" for r in plan.rewinds[:10]]
    more = f"\n  ... and {len(plan.rewinds) - 10} more" if len(plan.rewinds) > 10 else ""
    return (
        "this reset would re-ingest records that tables already hold:\n"
        + "\n".join(lines)
        + more
        + "\nthe job drops them unless the tables' offsets are lowered too; pass --rewind to do that "
        "(it leaves an icesink.rewind record in each table's snapshot), or reset --from-tables"
    )


def rows(plan: ResetPlan, marks: Mapping[TopicPartition, tuple[int, int]]) -> list[dict[str, object]]:
    return [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "start": off,
            "earliest": marks[tp][0],
            "end": marks[tp][1],
        }
        for tp, off in sorted(plan.starting.items())
    ]


def parse_spark_json(text: str) -> dict[TopicPartition, int]:
    raw = json.loads(text)
    return {TopicPartition(t, int(p)): int(o) for t, parts in raw.items() for p, o in parts.items()}


def complete(saved: Mapping[TopicPartition, int], current: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
    """Spark needs exactly the partitions it is assigned: the saved offsets for those, -2
    (earliest) for partitions that appeared since the reset; partitions gone are dropped."""
    return {tp: saved.get(tp, -2) for tp in current}
