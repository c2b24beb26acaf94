"""How many tasks the one-pass job runs for a batch: one per core, none smaller than RECORDS_PER_TASK."""

from __future__ import annotations

from icesink.batch.direct import RECORDS_PER_TASK, task_count


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
