"""The one-pass job's second rounds (batch/direct_rounds.py): which tables of changes whose keys
two tasks wrote a job of one task writes again, and which take Spark's path."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from icesink.batch.direct import Retry
from icesink.batch.direct_rounds import _in_one_task
from icesink.batch.write import CHANGES_PER_TASK


def table(name: str, records: int) -> tuple[Any, ...]:
    """An item (plan, table, planned) as far as the rounds look at it."""
    return (SimpleNamespace(table=name, records=records), None, None)


def test_one_task_takes_the_tables_it_can_hold_and_spark_the_others() -> None:
    big, small, other, gone = (table("big", CHANGES_PER_TASK), table("small", 10), table("other", 5),
                               table("gone", 1))  # fmt: skip
    evolving = table("evolving", 10**9)
    new = [Retry(big, whole=True), Retry(evolving), Retry(small, whole=True), Retry(other, whole=True),
           Retry(gone, whole=True)]  # fmt: skip
    again: list[Any] = [SimpleNamespace(item=big), SimpleNamespace(item=evolving), SimpleNamespace(item=small),
                        SimpleNamespace(item=other), None]  # fmt: skip
    held, unheld = _in_one_task(new, again, 7)
    assert [d.item[0].table for d in held] == ["big"], "a whole task's worth of changes, then nothing more"
    assert [item[0].table for item in unheld] == ["small", "other", "gone"], "not the evolving table"
    held, unheld = _in_one_task(new[1:], again[1:], 7)
    assert [d.item[0].table for d in held] == ["small", "other"], "tables that fit, each after the other"
    assert [item[0].table for item in unheld] == ["gone"], "no longer taken by the one-pass job"
