"""The executor-side writer against a local folder: Parquet with Iceberg field ids, rolled files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType, StructType, TimestamptzType

from icesink.tasks.descriptors import descriptor_batches
from icesink.tasks.files import TableFiles, WriteTask, write_files
from icesink.tasks.parquet_files import close_all, dictionary_columns, split_by_partition
from icesink.tasks.storage import StorageSettings
from tests.support.files import local_task

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "ts", TimestamptzType(), required=False),
    NestedField(4, "meta", StructType(NestedField(5, "k", StringType(), required=False)), required=False),
)


def spark_like_batch(start: int, n: int) -> pa.RecordBatch:
    # What Spark hands mapInArrow: its own names and Arrow types (string, not large_string).
    return pa.RecordBatch.from_arrays(
        [
            pa.array(range(start, start + n), pa.int64()),
            pa.array([f"n{i}" for i in range(start, start + n)], pa.string()),
            pa.array([i * 1_000_000 for i in range(n)], pa.timestamp("us", tz="UTC")),
            pa.array([{"k": str(i)} for i in range(n)], pa.struct([pa.field("k", pa.string())])),
        ],
        names=["id", "name", "ts", "meta"],
    )


def task(folder: Path, target: int = 128 * 1024 * 1024) -> WriteTask:
    return local_task(folder, schema_to_pyarrow(SCHEMA), target)


def test_files_carry_iceberg_field_ids_and_all_rows(tmp_path: Path) -> None:
    files = write_files(task(tmp_path), iter([spark_like_batch(0, 10), spark_like_batch(10, 5)]), partition_id=3)
    assert len(files) == 1
    uri, rows, size = files[0].path, files[0].record_count, files[0].file_size
    assert (files[0].content, files[0].partition) == ("data", ())
    assert uri.startswith(f"file://{tmp_path}/q-00000001-00003-")
    assert uri.endswith(".parquet")
    local = uri.removeprefix("file://")
    assert rows == 15
    assert size == Path(local).stat().st_size
    table = pq.read_table(local)
    assert table.column("id").to_pylist() == list(range(15))
    ids = {f.name: f.metadata[b"PARQUET:field_id"] for f in table.schema}
    assert ids == {"id": b"1", "name": b"2", "ts": b"3", "meta": b"4"}
    assert table.schema.field("meta").type.field("k").metadata[b"PARQUET:field_id"] == b"5"


def test_files_roll_at_the_target_size(tmp_path: Path) -> None:
    batches = iter([spark_like_batch(i * 300_000, 300_000) for i in range(3)])
    files = write_files(task(tmp_path, target=1024 * 1024), batches, partition_id=0)
    assert len(files) > 1
    assert sum(f.record_count for f in files) == 900_000
    for f in files:
        assert_footer_describes(f.footer, f.path)


def assert_footer_describes(footer: bytes, uri: str) -> None:
    """The footer a file's descriptor carries is the file's own: the same row groups, columns and
    statistics (what the commit's metrics are made of), readable as a Parquet file by itself."""
    sent = pq.read_metadata(pa.BufferReader(footer))
    written = pq.read_metadata(uri.removeprefix("file://"))
    assert sent.to_dict() == written.to_dict()
    assert sent.row_group(0).column(0).statistics == written.row_group(0).column(0).statistics


def test_every_file_carries_its_footer(tmp_path: Path) -> None:
    files = write_files(cdc_task(tmp_path, 0), iter([with_meta(spark_like_batch(0, 4), ["I", "U", "D", "I"], None)]), 0)
    assert {f.content for f in files} == {"data", "deletes"}
    for f in files:
        assert_footer_describes(f.footer, f.path)
        assert pq.read_metadata(pa.BufferReader(f.footer)).num_rows == f.record_count


def cdc_task(folder: Path, partitions: int) -> WriteTask:
    arrow = schema_to_pyarrow(SCHEMA)
    delete_schema = pa.schema([arrow.field("id")])
    return replace(local_task(folder, arrow), file_prefix="q-00000002", partition_columns=partitions,
                   delete_schema=delete_schema)  # fmt: skip


def with_meta(batch: pa.RecordBatch, ops: list[str], parts: list[str | None] | None) -> pa.RecordBatch:
    meta = [pa.array(parts, pa.string())] if parts is not None else []
    names = ["__icesink_part_0"] if parts is not None else []
    return pa.RecordBatch.from_arrays(
        [*meta, pa.array(ops, pa.string()), *batch.columns], names=[*names, "__icesink_op", *batch.schema.names]
    )


def test_changes_write_every_key_as_a_delete_and_non_deletes_as_rows(tmp_path: Path) -> None:
    batch = with_meta(spark_like_batch(0, 4), ["I", "U", "D", "U"], None)
    files = write_files(cdc_task(tmp_path, 0), iter([batch]), partition_id=0)
    by_kind = {f.content: f.path.removeprefix("file://") for f in files}
    assert sorted(by_kind) == ["data", "deletes"]
    deletes = pq.read_table(by_kind["deletes"])
    assert deletes.column_names == ["id"]
    assert deletes.column("id").to_pylist() == [0, 1, 2, 3]
    assert deletes.schema.field("id").metadata[b"PARQUET:field_id"] == b"1"
    assert pq.read_table(by_kind["data"]).column("id").to_pylist() == [0, 1, 3]


def test_rows_are_split_by_partition_value(tmp_path: Path) -> None:
    parts = ["1", "1", None, "0"]
    batch = with_meta(spark_like_batch(0, 4), ["U", "D", "U", "U"], parts)
    files = write_files(cdc_task(tmp_path, 1), iter([batch]), partition_id=0)
    got = {
        (f.content, f.partition): pq.read_table(f.path.removeprefix("file://")).column("id").to_pylist() for f in files
    }
    assert got == {
        ("data", ("1",)): [0],
        ("deletes", ("1",)): [0, 1],
        ("data", (None,)): [2],
        ("deletes", (None,)): [2],
        ("data", ("0",)): [3],
        ("deletes", ("0",)): [3],
    }


def test_the_files_of_many_partitions_are_closed_together_each_whole(tmp_path: Path) -> None:
    n = 40  # more open files than closing threads
    parts = [str(i % 20) for i in range(n)]
    files = write_files(cdc_task(tmp_path, 1), iter([with_meta(spark_like_batch(0, n), ["U"] * n, parts)]), 0)
    assert len(files) == 40
    # One file of each kind per partition, data files before delete files, each whole.
    assert [f.content for f in files] == ["data"] * 20 + ["deletes"] * 20
    assert {f.partition for f in files[:20]} == {f.partition for f in files[20:]} == {(str(p),) for p in range(20)}
    for f in files:
        ids = pq.read_table(f.path.removeprefix("file://")).column("id").to_pylist()
        assert ids == [int(f.partition[0]), int(f.partition[0]) + 20]
        assert_footer_describes(f.footer, f.path)


def test_a_tasks_last_rows_close_their_partitions_files_early_each_whole(tmp_path: Path) -> None:
    n = 40
    files = TableFiles(cdc_task(tmp_path, 1), 0)
    # Partition 0's rows come in two writes; the last (final) write closes the files of its
    # partitions once written (in the background), partition 9's too, which it does not hold.
    files.write(pa.Table.from_batches([with_meta(spark_like_batch(0, 10), ["U"] * 10, ["0"] * 9 + ["9"])]))
    last = with_meta(spark_like_batch(10, n), ["U", "D"] * (n // 2), [str(i % 4) for i in range(n)])
    files.write(pa.Table.from_batches([last]), final=True)
    done = files.close()
    got = {
        (f.content, f.partition): pq.read_table(f.path.removeprefix("file://")).column("id").to_pylist() for f in done
    }
    assert got[("deletes", ("0",))] == [*range(9), *range(10, 10 + n, 4)]
    assert got[("data", ("0",))] == [*range(9), *range(10, 10 + n, 4)]  # U, D alternate: i % 4 == 0 are Us
    assert ("data", ("1",)) not in got, "partition 1's last changes are deletes only: no data file"
    assert got[("deletes", ("9",))] == [9]
    assert sum(len(v) for (kind, _), v in got.items() if kind == "deletes") == 10 + n
    for f in done:
        assert_footer_describes(f.footer, f.path)


def test_closing_files_awaits_every_close_and_raises_the_first_failure() -> None:
    closed: list[int] = []

    class Writer:
        def __init__(self, i: int) -> None:
            self.i = i

        def close(self) -> None:
            if self.i == 3:
                raise OSError("upload of file 3 failed")
            closed.append(self.i)

    with pytest.raises(OSError, match="file 3"):
        close_all([Writer(i) for i in range(12)])  # type: ignore[list-item]
    assert sorted(closed) == [i for i in range(12) if i != 3]


def changes_batch(ids: list[int], ops: list[str], offsets: list[int], parts: list[str]) -> pa.RecordBatch:
    """A reducing CDC task's input: partition value, operation, order columns (topic, partition,
    offset), then the table's columns."""
    data = spark_like_batch(0, len(ids))
    n = len(ids)
    columns = [
        pa.array(parts, pa.string()),
        pa.array(ops, pa.string()),
        pa.array(["t"] * n, pa.string()),
        pa.array([0] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(ids, pa.int64()),
        *data.columns[1:],
    ]
    names = ["__icesink_part_0", "__icesink_op", *[f"__icesink_order_{i}" for i in range(3)], *data.schema.names]
    return pa.RecordBatch.from_arrays(columns, names=names)


def test_a_reducing_task_writes_each_keys_last_change_in_that_changes_partition(tmp_path: Path) -> None:
    # Key 1 moves from partition a to b; key 2 is inserted then deleted; key 3 only inserted. Its
    # rows arrive in two batches, out of offset order (after a shuffle).
    first = changes_batch([1, 2, 1], ["I", "I", "U"], [0, 1, 5], ["a", "a", "b"])
    second = changes_batch([2, 3, 1], ["D", "I", "U"], [7, 8, 2], ["a", "b", "a"])
    reducing = replace(cdc_task(tmp_path, 1), order_columns=3)
    files = write_files(reducing, iter([first, second]), partition_id=0)
    got = {
        (f.content, f.partition): sorted(pq.read_table(f.path.removeprefix("file://")).column("id").to_pylist())
        for f in files
    }
    assert got == {
        ("deletes", ("a",)): [2],
        ("data", ("b",)): [1, 3],
        ("deletes", ("b",)): [1, 3],
    }
    data = pq.read_table(next(f.path.removeprefix("file://") for f in files if f.content == "data"))
    assert data.column_names == ["id", "name", "ts", "meta"]  # no operation or order column
    assert sum(f.record_count for f in files if f.content == "data") == 2


def test_a_reducing_task_skips_a_key_whose_last_change_is_older_than_the_held_row(tmp_path: Path) -> None:
    # Order columns: ts (order_by), topic, partition, offset; then the held row's ts.
    n = 4
    data = spark_like_batch(0, n)
    columns = [
        pa.array(["U", "U", "U", "D"], pa.string()),
        pa.array([5, 9, 3, 1], pa.int64()),
        pa.array(["t"] * n, pa.string()),
        pa.array([0] * n, pa.int32()),
        pa.array(range(n), pa.int64()),
        pa.array([6, 6, 4, None], pa.int64()),
        pa.array([1, 1, 2, 3], pa.int64()),
        *data.columns[1:],
    ]
    names = ["__icesink_op", *[f"__icesink_order_{i}" for i in range(4)], "__icesink_held", *data.schema.names]
    task = replace(cdc_task(tmp_path, 0), order_columns=4, held_column=True)
    files = write_files(task, iter([pa.RecordBatch.from_arrays(columns, names=names)]), partition_id=0)
    got = {f.content: pq.read_table(f.path.removeprefix("file://")).column("id").to_pylist() for f in files}
    # Key 1: its last change (ts 9) is newer than the table's row (6); key 2's (3) is older than
    # its row (4): skipped; key 3 has no held row: its delete stands.
    assert got == {"data": [1], "deletes": [1, 3]}


def test_split_by_two_partition_columns_in_order_of_first_appearance_nulls_included() -> None:
    rows = pa.table({"a": ["x", None, "x", None, "y"], "b": [None, None, None, "1", "1"], "v": [1, 2, 3, 4, 5]})
    got = [(value, part.column("v").to_pylist()) for value, part in split_by_partition(rows, 2)]
    assert got == [(("x", None), [1, 3]), ((None, None), [2]), ((None, "1"), [4]), (("y", "1"), [5])]
    [(value, whole)] = split_by_partition(rows.filter(pa.array([True, False, True, False, False])), 2)
    assert (value, whole.num_rows) == (("x", None), 2)


def test_an_empty_partition_writes_no_file(tmp_path: Path) -> None:
    assert write_files(task(tmp_path), iter([]), partition_id=0) == []
    assert list(descriptor_batches([])) == []


def test_storage_settings_hide_secrets_and_map_s3_uris() -> None:
    st = StorageSettings(endpoint="http://127.0.0.1:7070", access_key_id="AK", secret_access_key="SK")
    assert "SK" not in repr(st)
    assert "AK" not in repr(st)
    fs, path = st.filesystem_for("s3://warehouse/ns/t/data/")
    assert path == "warehouse/ns/t/data/"
    assert fs.type_name == "s3"


def test_zip_finders_keep_their_directory_and_still_import(tmp_path, monkeypatch):
    import importlib
    import sys
    import zipfile
    import zipimport

    from icesink.tasks import worker_imports as writer

    archive = tmp_path / "code.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipmod_for_test/__init__.py", "X = 1\n")
        z.writestr("zipmod_for_test/sub.py", "Y = 2\n")
    monkeypatch.setattr(sys, "path", [*sys.path, str(archive)])
    assert importlib.import_module("zipmod_for_test").X == 1
    writer.keep_zip_directories()
    wrapped = [f for f in sys.path_importer_cache.values() if isinstance(f, writer._UnchangingZip)]
    assert wrapped
    assert not any(isinstance(f, zipimport.zipimporter) for f in sys.path_importer_cache.values())
    importlib.invalidate_caches()  # nothing re-read, nothing dropped
    assert all(isinstance(f, writer._UnchangingZip) for f in wrapped)
    assert importlib.import_module("zipmod_for_test.sub").Y == 2  # a new import from the zip works
    for name in ("zipmod_for_test", "zipmod_for_test.sub"):
        sys.modules.pop(name, None)


# Run in a fresh interpreter: freezing is for the life of a process.
_FREEZE_SCRIPT = """
import gc
import icesink.tasks.files  # what a worker imports to write: pyarrow, pydantic, ...
from icesink.tasks.worker_imports import freeze_imports

before = len(gc.get_objects())
freeze_imports()  # a worker's first task
after_first = len(gc.get_objects())
import xml.dom.minidom  # a first task imports more as it runs
freeze_imports()  # its second task
frozen = gc.get_freeze_count()
class Node:
    pass
a, b = Node(), Node()
a.other, b.other = b, a  # alive during a later task, then garbage only the cycle collector frees
for _ in range(5):  # later tasks freeze nothing more
    freeze_imports()
del a, b
print(before, after_first, frozen, gc.get_freeze_count(), gc.collect())
"""


def test_worker_imports_are_frozen_out_of_the_collectors_reach_and_later_garbage_is_still_freed() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _FREEZE_SCRIPT], check=True, capture_output=True, text=True)
    before, after_first, frozen, frozen_later, collected = map(int, out.stdout.split())
    # PySpark's daemon runs gc.collect() after every task; it no longer walks the imports.
    assert before > 20_000
    assert after_first < 1_000
    assert frozen >= before
    # Only the first tasks freeze: a cycle a later task leaves behind is collected, not kept.
    assert frozen_later == frozen
    assert collected >= 2


REQUIRED = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"1"}),
        pa.field("name", pa.large_string(), nullable=True, metadata={b"PARQUET:field_id": b"2"}),
    ]
)


def spark_rows(ids: list[int | None], names: list[str | None]) -> pa.Table:
    # Spark's names and types: int32 and string where the table has int64 and large_string.
    return pa.table({"col_0": pa.array(ids, pa.int32()), "col_1": pa.array(names, pa.string())})


def test_cast_names_the_table_and_column_when_a_required_column_has_nulls() -> None:
    import pytest

    from icesink.tasks.files import RequiredColumnError, _cast

    rows = spark_rows([1, None, None], ["a", "b", None])
    with pytest.raises(RequiredColumnError, match=r"^table ns\.t: 2 row\(s\) have no value for required column id "):
        _cast(rows, REQUIRED, "ns.t")
    assert issubclass(RequiredColumnError, ValueError)


def test_cast_takes_the_tables_names_types_and_field_ids() -> None:
    from icesink.tasks.files import _cast

    out = _cast(spark_rows([1, 2, 3], ["a", None, "c"]), REQUIRED, "ns.t")  # nulls in a nullable column are fine
    assert out.schema == REQUIRED
    assert out.schema.field("id").metadata == {b"PARQUET:field_id": b"1"}
    assert out.column("id").to_pylist() == [1, 2, 3]
    assert out.column("name").to_pylist() == ["a", None, "c"]
    assert _cast(spark_rows([], []), REQUIRED, "ns.t").num_rows == 0


def test_a_null_key_fails_the_write_naming_the_table(tmp_path: Path) -> None:
    import pytest

    from icesink.tasks.files import RequiredColumnError

    # A changelog table: every key goes to the equality-delete file, whose key column is required.
    t = WriteTask(
        table="ns.accounts",
        arrow_schema=REQUIRED,
        data_location=f"file://{tmp_path}/",
        file_prefix="q-00000003",
        storage=StorageSettings(),
        delete_schema=pa.schema([REQUIRED.field("id")]),
    )
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["U", "D"]), pa.array([1, None], pa.int64()), pa.array(["a", None])],
        names=["__icesink_op", "id", "name"],
    )
    with pytest.raises(RequiredColumnError, match=r"table ns\.accounts: 1 row\(s\) .* required column id"):
        write_files(t, iter([batch]), partition_id=0)


def test_only_strings_and_binaries_are_dictionary_encoded(tmp_path: Path) -> None:
    files = write_files(task(tmp_path), iter([spark_like_batch(0, 1000)]), partition_id=0)
    md = pq.read_metadata(files[0].path.removeprefix("file://")).row_group(0)
    encodings = {md.column(i).path_in_schema: md.column(i).encodings for i in range(md.num_columns)}
    assert "RLE_DICTIONARY" in encodings["name"]
    assert "RLE_DICTIONARY" in encodings["meta.k"]
    assert "RLE_DICTIONARY" not in encodings["id"]
    assert "RLE_DICTIONARY" not in encodings["ts"]


def test_dictionary_columns_are_the_string_leaves_by_parquet_path() -> None:
    schema = pa.schema(
        [
            pa.field("n", pa.int64()),
            pa.field("s", pa.struct([pa.field("a", pa.string()), pa.field("b", pa.float64())])),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("m", pa.map_(pa.string(), pa.int32())),
            pa.field("raw", pa.binary()),
        ]
    )
    assert dictionary_columns(schema) == ["s.a", "tags.list.element", "m.key_value.key", "raw"]


def test_a_column_of_distinct_strings_falls_back_to_plain_and_stays_small(tmp_path: Path) -> None:
    # 60,000 distinct uuid-like strings beside 4 repeated ones: the distinct column must leave its
    # dictionary early (a full one's indices compress worse than the plain strings: 1.5x the plain
    # size with pyarrow's default limit), the repeated one keeps it.
    n = 60_000
    names = [f"{i:08x}-0000-4000-8000-{i * 7:012x}" for i in range(n)]
    keys = [("view", "cart", "purchase", "refund")[i % 4] for i in range(n)]
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(range(n), pa.int64()),
            pa.array(names, pa.string()),
            pa.array([0] * n, pa.timestamp("us", tz="UTC")),
            pa.array([{"k": k} for k in keys], pa.struct([pa.field("k", pa.string())])),
        ],
        names=["id", "name", "ts", "meta"],
    )
    files = write_files(task(tmp_path), iter([batch]), partition_id=0)
    local = files[0].path.removeprefix("file://")
    md = pq.read_metadata(local).row_group(0)
    chunks = {md.column(i).path_in_schema: md.column(i) for i in range(md.num_columns)}
    assert "RLE_DICTIONARY" in chunks["meta.k"].encodings
    plain = pa.BufferOutputStream()
    pq.write_table(pa.table({"name": names}), plain, use_dictionary=False, compression="zstd", compression_level=3)
    plain_size = pq.read_metadata(pa.BufferReader(plain.getvalue())).row_group(0).column(0).total_compressed_size
    assert chunks["name"].total_compressed_size <= 1.1 * plain_size
    assert pq.read_table(local).column("name").to_pylist() == names
