"""Offsets, lag and status as rows for people (aligned text) and scripts (JSON). Pure."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

from icesink.iceberg.pyiceberg import TableState
from icesink.model import TopicPartition

Marks = Mapping[TopicPartition, tuple[int, int]]


def _iso(t: dt.datetime | None) -> str | None:
    return t.isoformat(timespec="seconds") if t is not None else None


def offset_rows(states: Sequence[TableState], marks: Marks) -> list[dict[str, Any]]:
    """One row per table and topic-partition: what the table holds against what Kafka has."""
    rows = []
    for s in states:
        for tp, committed in sorted(s.offsets.items()):
            earliest, end = marks.get(tp, (None, None))
            rows.append(
                {
                    "table": str(s.table),
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "committed": committed,
                    "snapshot_id": s.offsets_snapshot_id,
                    "committed_at": _iso(s.offsets_committed_at),
                    "earliest": earliest,
                    "end": end,
                    # Records Kafka has that the table does not; None when the topic is gone.
                    "lag": max(end - committed, 0) if end is not None else None,
                    # Records the table never got that retention already removed.
                    "lost": max(earliest - committed, 0) if earliest is not None else None,
                }
            )
    return rows


ROWS_NOTE = (
    "rows: live rows; for tables with delete files (upsert/changelog) icesink reads their key columns "
    "to apply the deletes, for others it is the snapshot's total-records"
)


def status_rows(states: Sequence[TableState], marks: Marks, dead_letters: Mapping[str, int]) -> list[dict[str, Any]]:
    """One row per table. `rows` is live rows (deletes applied, see `rows_counted`), `total_records`
    the snapshot's count of data rows before deletes."""
    rows = []
    for s in states:
        lags = [max(marks[tp][1] - o, 0) for tp, o in s.offsets.items() if tp in marks]
        rows.append(
            {
                "table": str(s.table),
                "last_commit_at": _iso(s.last_commit_at),
                "last_batch": s.batch_id,
                "rows": s.rows,
                "total_records": s.total_records,
                "rows_counted": s.rows_counted,
                "data_files": s.data_files,
                "delete_files": s.delete_files,
                "lag": sum(lags) if lags else None,
                "dead_letters_1d": dead_letters.get(str(s.table), 0),
            }
        )
    return rows


def text_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    cells = [[("-" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def as_json(rows: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps(list(rows), indent=2)
