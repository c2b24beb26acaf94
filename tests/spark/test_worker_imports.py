"""PySpark's Python workers, as the tasks leave them: pyarrow told there is no pandas (its first
conversion would import it: ~35 MB a worker; tasks/worker_imports.arrow_without_pandas) and taking
its memory from jemalloc (the workers' environment, job/session.py), and the tasks' conversions
working all the same."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator

import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import SparkSession

# This module's function goes to the workers by value (they do not import the tests).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _modules(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    import os

    from icesink.tasks.decode_json import DirectColumn, parsed_columns

    columns = [DirectColumn("id", "long"), DirectColumn("name", "string")]
    parsed = parsed_columns(columns, [b'{"id": 1, "name": "a"}', b'{"id": 2}'])
    rows = sum(b.num_rows for b in batches)
    yield pa.RecordBatch.from_arrays(
        [
            pa.array([os.getpid()] * rows, pa.int64()),
            pa.array(["pandas" in sys.modules] * rows),
            pa.array([parsed is not None and parsed[0].to_pylist() == [1, 2]] * rows),
            pa.array([pa.default_memory_pool().backend_name] * rows),
        ],
        names=["pid", "pandas", "parsed", "pool"],
    )


def test_the_workers_run_the_tasks_without_pandas_and_with_jemalloc(spark: SparkSession) -> None:
    schema = "pid long, pandas boolean, parsed boolean, pool string"
    rows = spark.range(0, 4, 1, 4).mapInArrow(_modules, schema).collect()
    assert len(rows) == 4
    assert [r.pandas for r in rows] == [False] * 4, "no worker imported pandas"
    assert [r.pool for r in rows] == ["jemalloc"] * 4
    assert all(r.parsed for r in rows), "Arrow's JSON reader and conversions as without the hook"
