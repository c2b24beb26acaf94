"""What the one-pass job's tasks report (tasks/one_pass.py's `DIRECT_DDL` rows, collected on the
driver): per table, its files, its dead letters, whether and why it was declined, and the writer
schemas its records carry that it was not given; and what the job says of a declined table or a
failed job."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from icesink.batch.direct_item import DirectItem
from icesink.batch.write import error_cause
from icesink.errors import WriteError
from icesink.kafka import wire
from icesink.model import PartitionRange, WrittenFile
from icesink.tasks.change_rows import shared_keys
from icesink.tasks.dead_letters import MAX_LETTERS, Letter, decoded
from icesink.tasks.decode_avro import DirectAvro
from icesink.tasks.decode_connect import DirectConnect
from icesink.tasks.descriptors import written_file
from icesink.tasks.one_pass import ROUTING, UNREAD
from icesink.tasks.route_judges import TopicValues, routing_of


@dataclass(frozen=True)
class Outcome:
    """What the one-pass job's rows say, per table index: its files, and why a table was declined."""

    files: Mapping[int, list[WrittenFile]]
    declined: frozenset[int]  # a record or value not taken, or all of them when Kafka was not read
    shared: frozenset[int]  # tables of changes whose keys were written by two tasks
    unread: bool  # a task could not read its records with librdkafka
    letters: Mapping[int, list[Letter]]  # the dead letters of the tables not declined
    too_many: frozenset[int]  # tables with more dead letters than the job reads back (`MAX_LETTERS`)
    # Avro tables declined for records of writer schemas they were not given: those schemas' frames.
    frames: Mapping[int, frozenset[bytes]] = field(default_factory=dict)
    # The routing of field-routed topics the tasks judged (tasks/route_judges.Judging): per topic,
    # the values met and the dead letters of the records no table takes; None when not judged.
    routing: Mapping[str, TopicValues] | None = None
    # Tables of changes declined for changes below their order floor: the least order value of those.
    older: Mapping[int, int] = field(default_factory=dict)

    def only(self, kept: Sequence[int]) -> Outcome:
        """The outcome of the tables `kept` (indexes), numbered in that order."""
        at = {old: new for new, old in enumerate(kept)}

        def mapped(m: Mapping[int, Any]) -> dict[int, Any]:
            return defaultdict(list, {at[i]: v for i, v in m.items() if i in at})

        def some(s: frozenset[int]) -> frozenset[int]:
            return frozenset(at[i] for i in s if i in at)

        return Outcome(
            mapped(self.files), some(self.declined), some(self.shared), self.unread, mapped(self.letters),
            some(self.too_many), mapped(self.frames), self.routing,
            {at[i]: v for i, v in self.older.items() if i in at},
        )  # fmt: skip


def outcome(rows: Sequence[Any], tables: int) -> Outcome:
    """The job's `DIRECT_DDL` rows (collected), for a job of `tables` tables."""
    judged = [bytes(r.letters) for r in rows if r.table == ROUTING]
    rows = [r for r in rows if r.table != ROUTING]
    declined = {int(r.table) for r in rows if r.declined}
    fingerprints: dict[int, list[bytes]] = defaultdict(list)
    for r in rows:
        if r.keys is not None:
            fingerprints[int(r.table)].append(bytes(r.keys))
    shared = {i for i, found in fingerprints.items() if i not in declined and shared_keys(found)}
    unread = UNREAD in declined
    files: dict[int, list[WrittenFile]] = defaultdict(list)
    letters: dict[int, list[Letter]] = defaultdict(list)
    for r in rows:
        if r.letters is not None:
            letters[int(r.table)] += decoded(bytes(r.letters))
        elif not r.declined and r.keys is None:
            files[int(r.table)].append(written_file(r))
    too_many = {i for i, found in letters.items() if len(found) > MAX_LETTERS}
    every = set(range(tables)) if unread else declined | shared | too_many
    kept = {i: found for i, found in letters.items() if i not in every}
    frames: dict[int, set[bytes]] = defaultdict(set)
    for r in rows:
        if r.declined and r.frames is not None and not unread:
            blob, n = bytes(r.frames), wire.HEADER_SIZE
            frames[int(r.table)] |= {blob[at : at + n] for at in range(0, len(blob), n)}
    new = {i: frozenset(found) for i, found in frames.items() if i not in shared | too_many}
    routing = routing_of(judged) if judged and not unread else None
    older: dict[int, int] = {}
    for r in rows:
        if r.declined and r.older is not None and not unread and int(r.table) not in too_many:
            older[int(r.table)] = min(int(r.older), older.get(int(r.table), int(r.older)))
    return Outcome(
        files, frozenset(every), frozenset(shared), unread, kept, frozenset(too_many), new, routing, older
    )  # fmt: skip


def why_declined(d: DirectItem, i: int, found: Outcome) -> str:
    """Why the job declined table `i` (`d`), for the job's log."""
    if found.unread:
        return "a task could not read its records with librdkafka"
    if i in found.shared:
        return "one of its keys has changes in topic-partitions that different tasks read"
    if i in found.too_many:
        return f"more than {MAX_LETTERS} of its records are dead letters"
    if i not in found.declined:
        return "the table as created does not fit the files written for it"
    if d.changes is not None:
        floor = d.order_floor
        older = f", an {d.changes.order_by} below {floor}, older than what the table holds" if floor is not None else ""
        return (
            f"a record the one-pass {_format(d)} decoder does not take (another schema, a body or record key that "
            "does not decode, a value out of range, an operation that is not ASCII, a JSON change event without "
            "its row or with an op not c, r, u or d; where the tasks make no dead letters (Connect JSON, a table "
            "routed by a record field, decode.on_error: fail), a change or tombstone without its key, a change with "
            f"an operation not I, U or D, a change event without its row or with an op not c, r, u or d{older})"
        )
    if isinstance(d.decoder, DirectAvro):
        return (
            "a record the one-pass Avro decoder does not take (another schema id, a body Spark's reader may read "
            f"otherwise, a value out of range), or more than {MAX_LETTERS} dead letters"
        )
    if isinstance(d.decoder, DirectConnect):
        return "a record the one-pass Connect JSON decoder does not take (a schema with a new column or another type)"
    return (
        "a record the one-pass JSON decoder does not take (a new column, another type, text Spark's reader may "
        f"read otherwise, such as single quotes or text after the object), or more than {MAX_LETTERS} dead letters"
    )


def _format(d: DirectItem) -> str:
    if isinstance(d.decoder, DirectAvro):
        return "Avro"
    return "Connect JSON" if isinstance(d.decoder, DirectConnect) else "JSON"


def direct_failed(items: list[DirectItem], read: list[PartitionRange], batch_id: int, e: BaseException) -> WriteError:
    """The error that ends a batch whose direct job failed: its tables, the offsets it read, the
    cause in one line, and what to do."""
    names = ", ".join(str(d.item[0].table) for d in items[:5])
    switch = "decode.direct_avro" if any(isinstance(d.decoder, DirectAvro) for d in items) else "decode.direct_json"
    if len(items) > 5:
        names += f" and {len(items) - 5} more"
    where = ", ".join(f"{r.tp} offsets {r.first_offset}-{r.last_offset}" for r in read[:5])
    if len(read) > 5:
        where += f" and {len(read) - 5} more topic-partitions"
    return WriteError(
        f"batch {batch_id}: writing tables {names} in one pass failed ({where}): {error_cause(e)[:500]}. Nothing "
        f"of this batch was committed; the job runs it again on restart. If it fails again the same way, set "
        f"{switch}: false to decode these tables through Spark, and report the records"
    )
