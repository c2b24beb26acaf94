"""PySpark's Python workers, as the job and the tasks leave them: pyarrow told there is no pandas (its
first conversion would import it: ~35 MB a worker; tasks/worker_imports.arrow_without_pandas),
taking its memory from jemalloc (the workers' environment, job/session.py), PySpark imported from
its installed package (icesink/worker_daemon.py), and the tasks' conversions working all the same."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyspark
from pyspark import cloudpickle
from pyspark.sql import SparkSession

# This module's function goes to the workers by value (they do not import the tests).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _modules(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    import os

    import pyspark

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
            pa.array([pyspark.__file__] * rows),
            pa.array([[p for p in sys.path if p.startswith(os.environ["SPARK_HOME"])]] * rows),
        ],
        names=["pid", "pandas", "parsed", "pool", "pyspark", "archives"],
    )


def test_the_workers_run_the_tasks_without_pandas_with_jemalloc_and_pysparks_bytecode(spark: SparkSession) -> None:
    schema = "pid long, pandas boolean, parsed boolean, pool string, pyspark string, archives array<string>"
    rows = spark.range(0, 4, 1, 4).mapInArrow(_modules, schema).collect()
    assert len(rows) == 4
    assert [r.pandas for r in rows] == [False] * 4, "no worker imported pandas"
    assert [r.pool for r in rows] == ["jemalloc"] * 4
    assert all(r.parsed for r in rows), "Arrow's JSON reader and conversions as without the hook"
    # This venv's PySpark is pip's layout (SPARK_HOME is the package): the workers import it, not
    # the zip Spark puts first on their path (icesink/worker_daemon.py).
    home = os.path.dirname(pyspark.__file__)
    assert {r.pyspark for r in rows} == {os.path.join(home, "__init__.py")}
    assert [r.archives for r in rows] == [[]] * 4, "no archive of SPARK_HOME on the workers' sys.path"
