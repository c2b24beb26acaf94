from __future__ import annotations

import datetime as dt

from icesink.iceberg.pyiceberg import TableState
from icesink.model import TableRef
from icesink.model import TopicPartition as TP
from icesink.ops.reports import offset_rows, status_rows, text_table

AT = dt.datetime(2026, 11, 26, 1, 2, 3, tzinfo=dt.UTC)


def state(name: str, offsets: dict[TP, int]) -> TableState:
    return TableState(TableRef("ns", name), offsets, 42, AT, 7, AT, 100, 3, 1, 5, 160, "deletes-applied")


def test_offset_rows_compare_tables_with_kafka() -> None:
    rows = offset_rows(
        [state("t", {TP("a", 1): 10, TP("a", 0): 5, TP("gone", 0): 3})],
        {TP("a", 0): (0, 8), TP("a", 1): (12, 20)},
    )
    assert [(r["topic"], r["partition"], r["committed"], r["end"], r["lag"], r["lost"]) for r in rows] == [
        ("a", 0, 5, 8, 3, 0),
        ("a", 1, 10, 20, 10, 2),
        ("gone", 0, 3, None, None, None),
    ]
    assert rows[0]["committed_at"] == "2026-11-26T01:02:03+00:00"
    assert rows[0]["snapshot_id"] == 42


def test_status_rows_sum_the_lag_and_count_dead_letters() -> None:
    rows = status_rows(
        [state("t", {TP("a", 0): 5, TP("a", 1): 10})], {TP("a", 0): (0, 8), TP("a", 1): (0, 10)}, {"ns.t": 4}
    )
    assert rows == [
        {
            "table": "ns.t",
            "last_commit_at": "2026-11-26T01:02:03+00:00",
            "last_batch": 7,
            "rows": 100,
            "total_records": 160,
            "rows_counted": "deletes-applied",
            "data_files": 3,
            "delete_files": 1,
            "lag": 3,
            "dead_letters_1d": 4,
        }
    ]


def test_text_tables_align_and_show_missing_values() -> None:
    out = text_table([{"a": "x", "b": None}, {"a": "longer", "b": 1}], ["a", "b"])
    assert out.splitlines() == ["A       B", "x       -", "longer  1"]
