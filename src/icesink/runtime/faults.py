"""Fault injection for the fault-injection tests. Inert unless its environment variables are set;
test code sets them, the README's config reference does not list them.

ICESINK_FAULT_INJECT=<point>:<batch id> kills the job with SIGKILL at that point of that batch,
the worst moments for exactly-once:
  after-commit        every table is committed, Spark has not written its commit log;
  after-dead-letters  the dead-letter table is committed, the data tables are not;
  before-multi-table-commit  every table's manifests are written for the one request that
                      commits them all (iceberg/transaction.py), which is not sent;
  after-multi-table-commit  that request was answered: every table holds the batch, nothing
                      else of it was recorded;
  mid-write           some tables' files are written, others not, nothing is committed;
  one-pass-again      the one-pass job's second round (batch/direct_rounds.py) wrote its files,
                      the first round's of the tables it took again are orphans, nothing is
                      committed;
  guess-refuted       the one-pass job wrote a batch planned with the values its field-routed
                      topics held before, met another, and nothing is committed: the batch is
                      about to be planned again (batch/route_guess.py);
  executor-write      a Python worker dies after writing its files, before reporting them
                      (only the worker is killed: Spark fails the task, and the batch);
  maintenance-compacted  the job's table maintenance run <id> (its count of runs, not a batch)
                      committed its compaction, and has not removed the deletes it left dangling;
  executor-lost       on a cluster: the executor JVM running the write dies (SIGKILL) after the
                      task wrote its files, before reporting them; Spark runs the task again
                      on another executor (the executors must see the variables:
                      spark.executorEnv.*).
The driver kills its JVM first, then itself, as a machine loss would. With
ICESINK_FAULT_ONCE=<path>, a kill happens only while <path> does not exist and creates it, so a
restarted job (or Spark's retry of the task) runs on.

ICESINK_FAULT_PAUSE=<point>:<batch id> with ICESINK_FAULT_PAUSE_FILE=<path> stops the job at
that point: it creates `<path>.reached` and waits until `<path>` exists (at most 10 minutes), so a
test can commit from another process in the window between planning and committing:
  before-plan         the batch's offset ranges are known, its tables not yet loaded (nor
                      taken as the job kept them: iceberg/kept_tables.py);
  before-table-commit  a table's offsets were checked, its snapshot is not yet committed;
  before-multi-table-staging  the batch's files are written, its tables' snapshots are not yet
                      staged for the one request (their offsets not yet checked again);
  before-multi-table-commit  the batch's tables are staged for the one request, not sent;
  maintenance-compacted  maintenance run <id> committed its compaction (the batches go on);
  maintenance-before-marker  maintenance run <id> committed its compaction, and has not committed
                      the snapshot that carries the offsets again where the catalog serves no
                      history (iceberg/offsets_marker.py; the batches go on).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

from pyspark.sql import SparkSession

from icesink.iceberg.jvm import jvm

ENV = "ICESINK_FAULT_INJECT"
ONCE_ENV = "ICESINK_FAULT_ONCE"
PAUSE_ENV = "ICESINK_FAULT_PAUSE"
PAUSE_FILE_ENV = "ICESINK_FAULT_PAUSE_FILE"
_PAUSE_LIMIT_S = 600
log = logging.getLogger(__name__)


def _armed(env: str, point: str, batch_id: int) -> bool:
    spec = os.environ.get(env, "")
    name, _, at = spec.partition(":")
    return name == point and at.strip() == str(batch_id)


def armed(point: str, batch_id: int) -> bool:
    if not _armed(ENV, point, batch_id):
        return False
    once = os.environ.get(ONCE_ENV)
    if not once:
        return True
    try:
        Path(once).touch(exist_ok=False)
    except FileExistsError:
        return False
    return True


def maybe_kill(point: str, batch_id: int, spark: SparkSession) -> None:
    if not armed(point, batch_id):
        return
    log.warning("fault injection: SIGKILL at %s of batch %d", point, batch_id)
    jvm_pid = int(jvm(spark).java.lang.ProcessHandle.current().pid())
    os.kill(jvm_pid, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def maybe_kill_worker(point: str, batch_id: int) -> None:
    """In a Python worker: kill only this process."""
    if armed(point, batch_id):
        os.kill(os.getpid(), signal.SIGKILL)


def maybe_kill_executor(point: str, batch_id: int) -> None:
    """In a Python worker on a cluster: kill the executor JVM that runs it (the nearest `java`
    among its ancestors; never in local mode, where that JVM is the driver's)."""
    if not armed(point, batch_id):
        return
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        name, ppid = stat[stat.index("(") + 1 : stat.rindex(")")], int(stat[stat.rindex(")") + 2 :].split()[1])
        if name == "java":
            with open(f"/proc/{pid}/cmdline") as f:
                if "CoarseGrainedExecutorBackend" not in f.read():
                    raise RuntimeError("fault injection: executor-lost needs a cluster's executor JVM")
            os.kill(pid, signal.SIGKILL)
            return
        pid = ppid


def maybe_pause(point: str, batch_id: int) -> None:
    if not _armed(PAUSE_ENV, point, batch_id):
        return
    release = Path(os.environ[PAUSE_FILE_ENV])
    log.warning("fault injection: paused at %s of batch %d until %s exists", point, batch_id, release)
    Path(f"{release}.reached").touch()
    deadline = time.monotonic() + _PAUSE_LIMIT_S
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
