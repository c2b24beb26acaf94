"""The tasks' Parquet files on the stack's S3 server (tasks/storage.py, tasks/parquet_files.py): a
file is uploaded at its close, in one request when it is smaller than a part, whole when it is not;
and what the delayed open defers (a missing bucket) still fails the close, naming the object."""

from __future__ import annotations

import os
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dev.kit.endpoints import S3_ENDPOINT
from dev.kit.oracle import s3_filesystem
from icesink.tasks.files import WriteTask
from icesink.tasks.parquet_files import DATA, Closer, RollingWriter
from icesink.tasks.storage import StorageSettings

BUCKET = "warehouse"  # the stack's (dev/stack)


def written(bucket: str, rows: pa.Table) -> RollingWriter:
    """A task's writer of one data file into `bucket` (its filesystem as tasks/files.py gets it),
    `rows` written, not closed."""
    task = WriteTask(
        table="ns.t", arrow_schema=rows.schema, data_location=f"s3://{bucket}/it-task-storage/{uuid.uuid4().hex}/",
        file_prefix="q-00000001", target_file_size=512 * 2**20,
        storage=StorageSettings(
            endpoint=S3_ENDPOINT, access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
            secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        ),
    )  # fmt: skip
    fs, folder = task.storage.filesystem_for(task.data_location)
    writer = RollingWriter(task, rows.schema, DATA, fs, folder, partition_id=0)
    writer.write(rows, ())
    return writer


def etag(path: str) -> str:
    with s3_filesystem().open_input_file(path) as f:
        return bytes(f.metadata()["ETag"]).decode().strip('"')


def size(path: str) -> int:
    return int(s3_filesystem().get_file_info(path).size)


def read_back(path: str) -> pa.Table:
    with s3_filesystem().open_input_file(path) as f:
        return pq.read_table(f)


def test_a_small_file_is_one_upload_at_its_close() -> None:
    rows = pa.table({"id": pa.array(range(1_000), pa.int64()), "name": [f"row-{i}" for i in range(1_000)]})
    writer = written(BUCKET, rows)
    writer.close()
    [f] = writer.done
    assert read_back(f.path).equals(rows)
    assert f.file_size == size(f.path), "the size the commit records is the object's"
    # A multipart upload's ETag ends in -<parts>: three requests (create, part, complete) a file.
    assert "-" not in etag(f.path), "the file was a multipart upload, not one PutObject"


def test_a_file_larger_than_a_part_is_uploaded_whole() -> None:
    noise = np.random.default_rng(7).integers(0, 2**63, size=2_000_000, dtype=np.int64)  # 16 MB, incompressible
    rows = pa.table({"v": noise})
    writer = written(BUCKET, rows)
    writer.close()
    [f] = writer.done
    assert f.file_size > 10 * 2**20
    assert read_back(f.path).equals(rows)
    assert "-" in etag(f.path), "a file over a part is still uploaded in parts"


def test_a_missing_bucket_fails_the_close_naming_the_object() -> None:
    missing = f"icesink-missing-{uuid.uuid4().hex[:12]}"
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    writer = written(missing, rows)  # the open is deferred: nothing fails yet
    closer = Closer()
    closer.submit([writer])
    with pytest.raises(OSError, match=missing):
        closer.wait()  # as a task's last step awaits its files (tasks/table_out.py)
    assert writer.done == [], "no file is described when its upload failed"
