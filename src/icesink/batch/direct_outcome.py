"""What the one-pass job's tasks report (tasks/one_pass.py's `DIRECT_DDL` rows, collected on the
driver): per table, its files, its dead letters, whether and why it was declined, and the writer
schemas its records carry that it was not given."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from icesink.kafka import wire
from icesink.model import WrittenFile
from icesink.tasks.change_rows import shared_keys
from icesink.tasks.dead_letters import MAX_LETTERS, Letter, decoded
from icesink.tasks.descriptors import written_file
from icesink.tasks.one_pass import UNREAD


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


def outcome(rows: Sequence[Any], tables: int) -> Outcome:
    """The job's `DIRECT_DDL` rows (collected), for a job of `tables` tables."""
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
    return Outcome(files, frozenset(every), frozenset(shared), unread, kept, frozenset(too_many), new)
