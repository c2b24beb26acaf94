"""Order bounds carried from the job's own commits: the greatest order value of the files a commit
added, read from the footers the writer sends along (tasks/files.py), and the cache that carries a
table's bound from snapshot to snapshot. The bound read from a table is pinned against the stack in
tests/integration/test_debezium.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

from icesink.iceberg import order_bound as ob
from icesink.model import TableRef, WrittenFile
from icesink.tasks.files import write_files
from tests.support.files import local_task

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "lsn", LongType(), required=False),
    NestedField(3, "name", StringType(), required=False),
)
T = TableRef("ns", "t")


def written(folder: Path, lsns: list[int | None], target: int = 128 * 1024 * 1024) -> list[WrittenFile]:
    folder.mkdir(parents=True, exist_ok=True)
    task = local_task(folder, schema_to_pyarrow(SCHEMA), target)
    n = len(lsns)
    rows = pa.RecordBatch.from_arrays(
        [pa.array(range(n), pa.int64()), pa.array(lsns, pa.int64()), pa.array([f"n{i}" for i in range(n)])],
        names=["id", "lsn", "name"],
    )
    return write_files(task, iter([rows]), partition_id=0)


def test_the_bound_of_written_files_is_their_greatest_value(tmp_path: Path) -> None:
    files = written(tmp_path / "a", [5, 17, None, 3]) + written(tmp_path / "b", [40, 2])
    assert ob.files_bound(files, "lsn") == (True, 40)
    assert ob.files_bound(written(tmp_path / "c", [None, None]), "lsn") == (True, None)
    assert ob.files_bound([], "lsn") == (True, None)


def test_a_file_without_its_footer_or_delete_files(tmp_path: Path) -> None:
    files = written(tmp_path, [5, 9])
    assert ob.files_bound([replace(files[0], footer=b"")], "lsn") == (False, None)
    # Delete files hold keys, not rows: they never move the bound (and need no footer).
    deletes = WrittenFile("s3://b/d.parquet", 1, 10, content="deletes")
    assert ob.files_bound([*files, deletes], "lsn") == (True, 9)


def test_a_timestamps_bound_is_its_microseconds(tmp_path: Path) -> None:
    """As `order_bound` reads a table's (unix_micros of the metrics' upper bound): an exact integer
    the tasks compare with the column's values, not a datetime of the Python process's zone."""
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "at", TimestamptzType()))
    task = local_task(tmp_path, schema_to_pyarrow(schema), 128 * 1024 * 1024)
    at = [1_700_000_000_123_456, None, 1_700_000_000_123_457, -5]
    rows = pa.RecordBatch.from_arrays(
        [pa.array(range(4), pa.int64()), pa.array(at, pa.timestamp("us", "UTC"))], names=["id", "at"]
    )
    files = write_files(task, iter([rows]), partition_id=0)
    assert ob.files_bound(files, "at") == (True, 1_700_000_000_123_457)
    floor = ob.files_bound(files, "at")[1]
    assert pa.scalar(floor, pa.timestamp("us", "UTC")).as_py().isoformat() == "2023-11-14T22:13:20.123457+00:00"


class Counting(ob.OrderBounds):
    """The cache without Spark: `order_bound` answers from a dict of (snapshot id -> bound)."""

    def __init__(self, bounds: dict[int, tuple[bool, Any]]) -> None:
        super().__init__(None, "cat")  # type: ignore[arg-type]
        self.table_bounds = bounds


@pytest.fixture
def bounds(monkeypatch: pytest.MonkeyPatch) -> Counting:
    cache = Counting({1: (True, 10), 7: (False, None)})
    monkeypatch.setattr(ob, "order_bound", lambda _spark, name, snapshot, column: cache.table_bounds[snapshot])
    return cache


def test_a_bound_is_carried_through_the_jobs_own_commits(bounds: Counting, tmp_path: Path) -> None:
    assert bounds.get(T, 1, "lsn") == (True, 10)
    bounds.committed(T, 1, 2, written(tmp_path / "a", [4, 30]))
    assert bounds.get(T, 2, "lsn") == (True, 30)
    bounds.committed(T, 2, 3, written(tmp_path / "b", [12]))  # older changes: the bound stays
    assert bounds.get(T, 3, "lsn") == (True, 30)
    assert bounds.reads == 1


def test_a_bound_is_read_again_after_another_writers_snapshot(bounds: Counting, tmp_path: Path) -> None:
    assert bounds.get(T, 1, "lsn") == (True, 10)
    bounds.committed(T, 5, 6, written(tmp_path / "a", [4]))  # on top of a snapshot it did not read
    bounds.table_bounds[6] = (True, 99)
    assert bounds.get(T, 6, "lsn") == (True, 99)
    assert bounds.reads == 2


def test_an_unknown_bound_is_never_carried(bounds: Counting, tmp_path: Path) -> None:
    assert bounds.get(T, 7, "lsn") == (False, None)
    bounds.committed(T, 7, 8, written(tmp_path / "a", [4]))
    bounds.table_bounds[8] = (False, None)
    assert bounds.get(T, 8, "lsn") == (False, None)
    assert bounds.reads == 2
    assert bounds.get(T, 1, "lsn") == (True, 10)
    bounds.committed(T, 1, 9, [replace(f, footer=b"") for f in written(tmp_path / "b", [50])])
    bounds.table_bounds[9] = (True, 50)
    assert bounds.get(T, 9, "lsn") == (True, 50)
    assert bounds.reads == 4


def test_another_column_is_read_again(bounds: Counting) -> None:
    assert bounds.get(T, 1, "lsn") == (True, 10)
    assert bounds.get(T, 1, "ts_ms") == (True, 10)
    assert bounds.reads == 2
