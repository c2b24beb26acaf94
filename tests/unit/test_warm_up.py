"""The Python workers' warm-up task (tasks/warm_up.py): what a first batch's task imports, done."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pyarrow as pa

from icesink.tasks.warm_up import warm_fn

_PROBE = """
import sys
import pyspark.worker
from icesink.tasks.warm_up import warm_fn
list(warm_fn(iter([])))
print(" ".join(m for m in ("polars", "pandas", "confluent_kafka", "icesink.tasks.one_pass") if m in sys.modules))
"""


def test_the_warm_up_task_answers_its_workers_process_id() -> None:
    try:
        [out] = list(warm_fn(iter([pa.record_batch([pa.array([0], pa.int64())], names=["id"])])))
    finally:
        gc.unfreeze()  # the task froze what this test process holds
    assert out.to_pylist() == [{"pid": os.getpid()}]


def test_a_warmed_up_worker_holds_what_a_first_batch_imports() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["polars", "pandas", "confluent_kafka", "icesink.tasks.one_pass"]
