"""Live rows of a snapshot: Iceberg's delete semantics over arrow tables, without any service."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO

from icesink.iceberg import pyiceberg as table_state
from icesink.iceberg.live_count import read_columns
from icesink.iceberg.live_rows import (
    DATA,
    EQUALITY_DELETES,
    FILE_PATH_ID,
    POS_ID,
    POSITION_DELETES,
    FileEntry,
    columns_to_read,
    live_rows,
)
from icesink.model import TableRef

ID, NAME, REGION = 1, 2, 3  # field ids


class Files:
    """A snapshot under construction: manifest entries and the arrow table of each file."""

    def __init__(self) -> None:
        self.entries: list[FileEntry] = []
        self.tables: dict[str, pa.Table] = {}

    def data(self, seq: int, rows: dict[int, list[Any]], partition: tuple[Any, ...] = ()) -> str:
        path = f"s3://b/data/{len(self.entries)}.parquet"
        n = len(next(iter(rows.values())))
        self.entries.append(FileEntry(path, DATA, seq, n, partition=partition, unpartitioned=not partition))
        self.tables[path] = pa.table({str(k): v for k, v in rows.items()})
        return path

    def eq_delete(self, seq: int, rows: dict[int, list[Any]], partition: tuple[Any, ...] = ()) -> str:
        path = f"s3://b/data/{len(self.entries)}-eq-deletes.parquet"
        n = len(next(iter(rows.values())))
        ids = tuple(rows)
        self.entries.append(
            FileEntry(path, EQUALITY_DELETES, seq, n, ids, partition=partition, unpartitioned=not partition)
        )
        self.tables[path] = pa.table({str(k): v for k, v in rows.items()})
        return path

    def pos_delete(self, seq: int, deletes: list[tuple[str, int]]) -> str:
        path = f"s3://b/data/{len(self.entries)}-pos-deletes.parquet"
        self.entries.append(FileEntry(path, POSITION_DELETES, seq, len(deletes)))
        self.tables[path] = pa.table(
            {"file_path": [p for p, _ in deletes], "pos": pa.array([i for _, i in deletes], pa.int64())}
        )
        return path

    def live(self) -> int:
        wanted = columns_to_read(self.entries)
        # Only what columns_to_read asks for, as the I/O part reads it.
        given = {
            p: self.tables[p].select([c for c in self.tables[p].column_names if _wanted(c, wanted[p])]) for p in wanted
        }
        return live_rows(self.entries, given)


def _wanted(column: str, ids: Sequence[int]) -> bool:
    return column in {"file_path", "pos"} or int(column) in ids


def test_without_deletes_every_row_is_live_and_nothing_is_read() -> None:
    f = Files()
    f.data(1, {ID: [1, 2, 3]})
    f.data(2, {ID: [1, 2]})
    assert columns_to_read(f.entries) == {}
    assert live_rows(f.entries, {}) == 5


def test_an_equality_delete_applies_only_to_lower_sequence_numbers() -> None:
    f = Files()
    f.data(1, {ID: [1, 2, 3], NAME: ["a", "b", "c"]})
    f.eq_delete(2, {ID: [2, 3, 99]})  # 99 was never written: harmless
    f.data(3, {ID: [3]})  # written after the delete: stays
    assert f.live() == 2  # 1 (seq 1) and 3 (seq 3)


def test_rows_of_the_same_commit_survive_its_own_delete() -> None:
    # An upsert batch: an equality delete for every touched key plus the new rows, one commit.
    f = Files()
    f.data(1, {ID: [1, 2]})
    f.eq_delete(2, {ID: [1, 2, 3]})
    f.data(2, {ID: [1, 3]})
    assert f.live() == 2  # 1 and 3 of seq 2; 2 deleted


def test_re_insert_after_a_delete_and_delete_again() -> None:
    f = Files()
    f.data(1, {ID: [7]})
    f.eq_delete(2, {ID: [7]})
    assert f.live() == 0
    f.data(3, {ID: [7]})
    assert f.live() == 1
    f.eq_delete(4, {ID: [7]})
    assert f.live() == 0
    f.eq_delete(4, {ID: [7]})  # the same key deleted twice: still one row gone
    f.data(4, {ID: [7, 8]})
    assert f.live() == 2


def test_position_deletes_apply_to_equal_or_lower_sequence_numbers() -> None:
    f = Files()
    a = f.data(1, {ID: [1, 2, 3, 4, 5]})
    b = f.data(3, {ID: [6, 7]})
    f.pos_delete(1, [(a, 0)])  # same sequence number: applies
    f.pos_delete(2, [(a, 1), (a, 1), (b, 0), ("s3://b/data/gone.parquet", 0), (a, 99)])  # b is newer: no
    assert f.live() == 7 - 2
    wanted = columns_to_read(f.entries)
    assert a not in wanted, "position deletes name rows by position: the data file is not read"
    assert all(ids == (FILE_PATH_ID, POS_ID) for p, ids in wanted.items() if "pos-deletes" in p)


def test_a_row_deleted_by_position_and_by_equality_counts_once() -> None:
    f = Files()
    a = f.data(1, {ID: [1, 2, 3]})
    f.eq_delete(2, {ID: [1]})
    f.pos_delete(2, [(a, 0), (a, 2)])
    assert f.live() == 1
    assert columns_to_read(f.entries)[a] == (ID,)


def test_several_equality_id_sets() -> None:
    f = Files()
    f.data(1, {ID: [1, 2, 3, 4], NAME: ["a", "b", "c", "d"], REGION: ["eu", "eu", "us", "us"]})
    f.eq_delete(2, {ID: [1]})
    f.eq_delete(2, {NAME: ["c", "d"], REGION: ["us", "eu"]})  # (c, us) matches, (d, eu) does not
    f.eq_delete(3, {NAME: ["a"], REGION: ["eu"]})  # row 1 again: counted once
    assert f.live() == 2
    assert columns_to_read(f.entries)[f.entries[0].path] == (ID, NAME, REGION)


def test_partitions_scope_equality_deletes_unless_the_delete_is_unpartitioned() -> None:
    f = Files()
    f.data(1, {ID: [1, 2], REGION: ["eu", "eu"]}, partition=("eu",))
    f.data(1, {ID: [1, 2], REGION: ["us", "us"]}, partition=("us",))
    f.eq_delete(2, {ID: [1]}, partition=("eu",))  # only eu's 1
    assert f.live() == 3
    f.eq_delete(3, {ID: [2]})  # unpartitioned: both 2s
    assert f.live() == 1


def test_partitioning_by_the_key_counts_as_unpartitioned() -> None:
    # icesink's CDC tables partition by key columns only, so a key's rows and deletes share a partition.
    changes = list(_random_commits(random.Random(3), commits=12, keys=40))
    unpartitioned, bucketed = Files(), Files()
    for seq, deletes, inserts in changes:
        unpartitioned.eq_delete(seq, {ID: deletes})
        unpartitioned.data(seq, {ID: inserts})
        for bucket in range(4):
            mine = [k for k in deletes if k % 4 == bucket]
            if mine:
                bucketed.eq_delete(seq, {ID: mine}, partition=(bucket,))
            rows = [k for k in inserts if k % 4 == bucket]
            if rows:
                bucketed.data(seq, {ID: rows}, partition=(bucket,))
    expected = _replay(changes)
    assert unpartitioned.live() == bucketed.live() == expected


def test_null_matches_null_and_types_are_unified() -> None:
    f = Files()
    f.data(1, {ID: pa.array([1, 2, 3], pa.int32()), NAME: ["a", None, None]})
    f.data(1, {ID: pa.array([4], pa.int64())})  # written before NAME existed: null
    f.eq_delete(2, {ID: pa.array([2], pa.int64()), NAME: pa.array([None], pa.string())})
    f.eq_delete(2, {ID: pa.array([4], pa.int64()), NAME: pa.array([None], pa.string())})
    f.eq_delete(2, {ID: pa.array([1], pa.int64()), NAME: pa.array(["b"], pa.string())})
    tables = dict(f.tables)
    tables[f.entries[1].path] = pa.table({str(ID): pa.array([4], pa.int64()), str(NAME): pa.nulls(1)})
    assert live_rows(f.entries, tables) == 2  # 1 (name a) and 3 (null, but id 3)


def test_delete_files_that_apply_to_no_live_data_file_are_not_read() -> None:
    f = Files()
    f.eq_delete(1, {ID: [1]})  # compaction rewrote the data it applied to
    new = f.data(2, {ID: [1, 2]})
    f.pos_delete(1, [(new, 0)])  # older than the data file
    assert columns_to_read(f.entries) == {}
    assert f.live() == 2


def test_a_data_file_read_short_is_an_error() -> None:
    f = Files()
    a = f.data(1, {ID: [1, 2]})
    f.eq_delete(2, {ID: [1]})
    f.tables[a] = f.tables[a].slice(0, 1)
    with pytest.raises(ValueError, match="has 1 rows, its manifest entry 2"):
        f.live()


def test_random_commits_agree_with_a_row_by_row_oracle() -> None:
    rng = random.Random(11)
    for _ in range(20):
        changes = list(_random_commits(rng, commits=rng.randint(1, 15), keys=rng.randint(1, 30)))
        f = Files()
        for seq, deletes, inserts in changes:
            f.eq_delete(seq, {ID: deletes})
            if inserts:
                f.data(seq, {ID: inserts})
        # A maintenance run's position deletes on a few rows, as Spark writes them.
        data = [e for e in f.entries if e.content == DATA]
        if data:
            top = max(e.sequence_number for e in f.entries)
            picks = [(d.path, rng.randrange(d.record_count)) for d in rng.sample(data, min(3, len(data)))]
            f.pos_delete(top, picks)
        assert f.live() == _oracle(f)


def _random_commits(rng: random.Random, commits: int, keys: int) -> Any:
    """Upsert batches: (sequence number, keys deleted, rows inserted), as icesink commits them."""
    for seq in range(1, commits + 1):
        touched = rng.sample(range(keys), rng.randint(1, keys))
        yield seq, touched, [k for k in touched if rng.random() < 0.7]


def _replay(changes: list[tuple[int, list[int], list[int]]]) -> int:
    live: set[int] = set()
    for _, deletes, inserts in changes:
        live -= set(deletes)
        live |= set(inserts)
    return len(live)


def _oracle(f: Files) -> int:
    """The spec, one row at a time."""
    count = 0
    for d in (e for e in f.entries if e.content == DATA):
        rows = f.tables[d.path].to_pylist()
        for pos, row in enumerate(rows):
            gone = False
            for e in f.entries:
                t = f.tables[e.path].to_pylist()
                if e.content == EQUALITY_DELETES and e.sequence_number > d.sequence_number:
                    same_partition = e.unpartitioned or e.group == d.group
                    key = {str(i): row.get(str(i)) for i in e.equality_ids}
                    gone |= same_partition and key in t
                elif e.content == POSITION_DELETES and e.sequence_number >= d.sequence_number:
                    gone |= {"file_path": d.path, "pos": pos} in t
            count += not gone
    return count


def test_read_columns_by_field_id_nested_missing_and_by_name(tmp_path: Path) -> None:
    def field(name: str, type_: pa.DataType, fid: int) -> pa.Field:
        return pa.field(name, type_, metadata={b"PARQUET:field_id": str(fid).encode()})

    key = pa.struct([field("id", pa.int64(), 11), field("zone", pa.string(), 12)])
    schema = pa.schema([field("renamed_id", pa.int64(), ID), field("_key", key, 10), field("big", pa.string(), 5)])
    table = pa.table(
        {
            "renamed_id": [1, 2],
            "_key": [{"id": 7, "zone": "a"}, {"id": 8, "zone": "b"}],
            "big": ["x" * 10, "y" * 10],
        },
        schema=schema,
    )
    with_ids = tmp_path / "with-ids.parquet"
    pq.write_table(table, with_ids)
    got = read_columns(PyArrowFileIO(), str(with_ids), [ID, 11, 99], {})
    assert got.column_names == ["1", "11", "99"]
    assert got.to_pydict() == {"1": [1, 2], "11": [7, 8], "99": [None, None]}

    plain = tmp_path / "no-ids.parquet"
    pq.write_table(pa.table({"file_path": ["f", "g"], "pos": [3, 4]}), plain)
    got = read_columns(PyArrowFileIO(), str(plain), [FILE_PATH_ID, POS_ID], {FILE_PATH_ID: "file_path", POS_ID: "pos"})
    assert got.to_pydict() == {str(FILE_PATH_ID): ["f", "g"], str(POS_ID): [3, 4]}


def _table(summary: dict[str, str]) -> Any:
    snapshot = SimpleNamespace(
        snapshot_id=5,
        parent_snapshot_id=None,
        timestamp_ms=1_790_000_000_000,
        summary=SimpleNamespace(additional_properties=summary),
    )
    return SimpleNamespace(current_snapshot=lambda: snapshot)


def test_state_of_reads_files_only_for_tables_with_delete_files(monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[Any] = []
    monkeypatch.setattr(table_state, "count_live_rows", lambda t: counted.append(t) or 6_737)
    ref = TableRef("ns", "t")
    plain = _table({"total-records": "100", "total-delete-files": "0"})
    s = table_state.state_of(ref, plain, live=True)
    assert (s.rows, s.total_records, s.rows_counted, counted) == (100, 100, "total-records", [])

    cdc = _table({"total-records": "18822", "total-delete-files": "12"})
    s = table_state.state_of(ref, cdc, live=True)
    assert (s.rows, s.total_records, s.rows_counted, counted) == (6_737, 18_822, "deletes-applied", [cdc])
    s = table_state.state_of(ref, cdc)  # offsets show and reset: no file reads
    assert (s.rows, s.rows_counted, len(counted)) == (18_822, "total-records", 1)


def test_state_of_names_a_file_it_cannot_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(t: Any) -> int:
        raise table_state.UnsupportedFileError("s3://b/d.avro is AVRO; only Parquet files are read")

    monkeypatch.setattr(table_state, "count_live_rows", refuse)
    s = table_state.state_of(TableRef("ns", "t"), _table({"total-records": "9", "total-delete-files": "1"}), live=True)
    assert (s.rows, s.rows_counted) == (None, "not-counted")
    assert s.rows_note == "s3://b/d.avro is AVRO; only Parquet files are read"
