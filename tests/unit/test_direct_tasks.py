"""How many tasks the one-pass job runs for a batch (one per core, none smaller than RECORDS_PER_TASK),
and what the driver makes of their result rows."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa

from icesink.batch.direct import RECORDS_PER_TASK, task_count
from icesink.batch.direct_outcome import outcome
from icesink.kafka import wire
from icesink.tasks.change_rows import key_fingerprints
from icesink.tasks.dead_letters import MAX_LETTERS, NULL_VALUE, Letter, encoded
from icesink.tasks.one_pass import UNREAD


def test_a_small_batch_is_one_task_and_so_one_file_per_table() -> None:
    assert task_count(1, cores=2) == 1
    assert task_count(5_000, cores=2) == 1
    assert task_count(2 * RECORDS_PER_TASK - 1, cores=2) == 1


def test_a_batch_spreads_over_every_core_once_each_share_is_big_enough() -> None:
    assert task_count(2 * RECORDS_PER_TASK, cores=2) == 2
    assert task_count(500_000, cores=2) == 2
    assert task_count(500_000, cores=8) == 8
    assert task_count(3 * RECORDS_PER_TASK, cores=8) == 3


def test_an_empty_share_still_gets_a_task() -> None:
    assert task_count(0, cores=4) == 1


def descriptor(
    table: int, path: str = "", declined: bool = False, keys: bytes | None = None, letters: bytes | None = None,
    frames: bytes | None = None, older: int | None = None,
) -> SimpleNamespace:  # fmt: skip
    """A row of the one-pass job's result (DIRECT_DDL), as the driver collects it."""
    return SimpleNamespace(
        table=table, declined=declined, keys=keys, letters=letters, frames=frames, older=older, path=path,
        record_count=1, file_size=1, content="data", partition=[], footer=None,
    )  # fmt: skip


def test_the_outcome_gathers_the_writer_schemas_each_declined_table_was_not_given() -> None:
    """Each task says which frames it met; the driver looks up all of them at once (batch/direct_rounds.py)."""
    a, b, c = (wire.id_key(n) for n in (3, 4, 5))
    rows = [
        descriptor(0, declined=True, frames=a + b),
        descriptor(0, declined=True, frames=b + c),
        descriptor(1, declined=True),  # declined for its bytes: no second job
        descriptor(2, "x.parquet"),
    ]
    found = outcome(rows, 3)
    assert found.frames == {0: frozenset({a, b, c})}
    assert found.declined == {0, 1}
    unread = outcome([*rows, descriptor(UNREAD, declined=True)], 3)
    assert unread.frames == {}, "a task that could not read: Spark's path reads every table"


def test_the_outcome_keeps_the_least_order_value_below_a_tables_floor_over_its_tasks() -> None:
    """Each task declining a table of changes for changes below its order floor says the least of
    them; the second round reads the rows the table holds above the least of all (batch/direct_held.py)."""
    rows = [
        descriptor(0, declined=True, older=700),
        descriptor(0, declined=True, older=-5),
        descriptor(0, declined=True),  # declined for another reason in a third task
        descriptor(1, declined=True),
        descriptor(2, "x.parquet"),
    ]
    found = outcome(rows, 3)
    assert found.older == {0: -5}
    assert found.declined == {0, 1}
    assert found.only([2, 0]).older == {1: -5}, "renumbered with the tables kept"
    unread = outcome([*rows, descriptor(UNREAD, declined=True)], 3)
    assert unread.older == {}, "a task that could not read: Spark's path reads every table"


def test_the_outcome_gathers_each_tables_dead_letters_from_its_tasks() -> None:
    def letter(offset: int) -> Letter:
        return Letter("t", 0, offset, *NULL_VALUE)

    many = [letter(i) for i in range(MAX_LETTERS + 1)]
    rows = [
        descriptor(0, "a.parquet"),
        descriptor(0, letters=encoded([letter(3)])),
        descriptor(0, letters=encoded([letter(9), letter(4)])),
        descriptor(1, "b.parquet"),
        descriptor(1, letters=encoded(many)),  # too many to read back: Spark's path
        descriptor(2, letters=encoded([letter(1)])),
        descriptor(2, declined=True),
    ]
    found = outcome(rows, 3)
    assert [f.path for f in found.files[0]] == ["a.parquet"]
    assert found.letters == {0: [letter(3), letter(9), letter(4)]}
    assert found.declined == found.too_many | {2} == {1, 2}


def test_the_outcome_keeps_each_tables_files_and_why_one_was_declined() -> None:
    one, two = key_fingerprints(pa.table({"id": [1]})), key_fingerprints(pa.table({"id": [2]}))
    rows = [
        descriptor(0, "a.parquet"),
        descriptor(0, "b.parquet"),
        descriptor(1, declined=True),
        descriptor(2, "c.parquet"),
        descriptor(2, keys=one),
        descriptor(2, keys=one),  # the same key written by two tasks
        descriptor(3, "d.parquet"),
        descriptor(3, keys=one),
        descriptor(3, keys=two),
    ]
    found = outcome(rows, 4)
    assert [f.path for f in found.files[0]] == ["a.parquet", "b.parquet"]
    assert found.declined == {1, 2}
    assert found.shared == {2}
    assert not found.unread


def test_a_task_that_could_not_read_its_records_declines_every_table() -> None:
    found = outcome([descriptor(0, "a.parquet"), descriptor(UNREAD, declined=True)], 3)
    assert found.unread
    assert found.declined == {0, 1, 2}
