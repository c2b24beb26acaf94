"""Which tables a batch may plan on without loading them (iceberg/kept_tables.py): the ages and
the forgetting; the multi-table request's metadata is set on a real table in
tests/integration/test_multi_table_commit.py."""

from __future__ import annotations

import pytest

from icesink.iceberg import kept_tables
from icesink.iceberg.kept_tables import KeptTables
from icesink.model import TableRef

A, B = TableRef("ns", "a"), TableRef("ns", "b")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(kept_tables.time, "monotonic", lambda: now[0])
    return now


def test_a_table_is_kept_for_its_age_from_when_the_catalog_said_it(clock: list[float]) -> None:
    kept = KeptTables(30.0)
    table = object()
    kept.heard(A, table)
    clock[0] += 29.9
    assert kept.get(A) is table
    assert kept.get(B) is None
    clock[0] += 0.1
    assert kept.get(A) is None, "as old as keep_tables_s: loaded again"
    kept.heard(A, table)
    assert kept.get(A) is table


def test_nothing_is_kept_with_zero(clock: list[float]) -> None:
    kept = KeptTables(0.0)
    kept.heard(A, object())
    assert kept.get(A) is None


def test_forgotten_tables_are_loaded_again(clock: list[float]) -> None:
    kept = KeptTables(30.0)
    kept.heard(A, object())
    kept.heard(B, object())
    kept.forget(A)
    assert kept.get(A) is None
    assert kept.get(B) is not None
    kept.forget_all()
    assert kept.get(B) is None


def test_a_table_committed_together_but_not_the_one_kept_is_forgotten(clock: list[float]) -> None:
    """A table loaded again meanwhile, or never heard of, is not the object kept: nothing is set on
    it, and the next batch loads it."""
    kept = KeptTables(30.0)
    kept.heard(A, object())
    kept.committed_together(A, object(), metadata=None, snapshot_id=1)
    assert kept.get(A) is None
    kept.committed_together(B, object(), metadata=None, snapshot_id=1)
    assert kept.get(B) is None
