"""The Python workers' warm-up task (tasks/warm_up.py): what a first batch's task imports, done; and
not pandas, which pyarrow would import at its first conversion (tasks/worker_imports.py)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pyarrow as pa

from icesink.tasks.warm_up import warm_fn

_PROBE = """
import sys
if sys.argv[1] == "worker":
    import pyspark.worker  # as in PySpark's workers, imported before the tasks' functions
from icesink.tasks.warm_up import warm_fn
list(warm_fn(iter([])))
import pyarrow as pa
from icesink.tasks.decode_json import parsed_columns
pa.array([1, None]), pa.scalar("x"), pa.table({"a": [1.5]})
print(" ".join(m for m in ("polars", "pandas", "confluent_kafka", "icesink.tasks.one_pass") if m in sys.modules))
"""


def test_the_warm_up_task_answers_its_workers_process_id() -> None:
    try:
        [out] = list(warm_fn(iter([pa.record_batch([pa.array([0], pa.int64())], names=["id"])])))
    finally:
        gc.unfreeze()  # the task froze what this test process holds
    assert out.to_pylist() == [{"pid": os.getpid()}]


def _probe(process: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, process], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_warmed_up_worker_holds_what_a_first_batch_imports_but_pandas() -> None:
    assert _probe("worker") == ["polars", "confluent_kafka", "icesink.tasks.one_pass"]


def test_outside_a_worker_pyarrow_still_takes_pandas() -> None:
    """The driver (and any other process importing the tasks' modules) keeps pyarrow's pandas."""
    assert _probe("driver") == ["polars", "pandas", "confluent_kafka", "icesink.tasks.one_pass"]
