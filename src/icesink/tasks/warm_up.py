"""A Python worker's imports, done before the first batch needs them (the driver's side is
job/warm_up.py). A worker's first task imports the tasks' modules, polars and librdkafka's client
(not pandas: worker_imports.arrow_without_pandas): ~1.5 s of a worker's start on two cores,
which the job's first batch waited for after its planning. PySpark reuses a worker for the next
tasks, so a first batch that comes after this runs on workers that have imported all of it."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Iterator

import pyarrow as pa

import icesink.tasks.files
import icesink.tasks.one_pass
import icesink.tasks.route_values  # noqa: F401  (imported for the import's sake, as the rest)

WARM_UP_DDL = "pid long"


def warm_fn(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The function handed to DataFrame.mapInArrow: one row per task, its worker's process id."""
    import confluent_kafka  # noqa: F401
    import polars  # noqa: F401
    import pyarrow.fs

    from icesink.tasks.worker_imports import keep_zip_directories

    keep_zip_directories()
    pyarrow.fs.ensure_s3_initialized()
    # Out of the collector's reach, which PySpark's daemon runs after each task (as the first
    # tasks' freeze_imports does; not counted among its freezes: those come after a first write).
    gc.freeze()
    for _ in batches:
        pass
    yield pa.RecordBatch.from_arrays([pa.array([os.getpid()], pa.int64())], names=["pid"])
