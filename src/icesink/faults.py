"""Fault injection for the crash tests. Inert unless ICESINK_FAULT_INJECT is set.

ICESINK_FAULT_INJECT=<point>:<batch id> kills the job (the driver JVM, then this process) with
SIGKILL at that point of that batch, the worst moments for exactly-once:
  after-commit        every table is committed, Spark has not written its commit log;
  after-dead-letters  the dead-letter table is committed, the data tables are not.
Test code sets it; the README's config reference does not list it.
"""

from __future__ import annotations

import logging
import os
import signal

from pyspark.sql import SparkSession

from icesink.jvm import jvm

ENV = "ICESINK_FAULT_INJECT"
log = logging.getLogger(__name__)


def armed(point: str, batch_id: int) -> bool:
    spec = os.environ.get(ENV, "")
    name, _, at = spec.partition(":")
    return name == point and at.strip() == str(batch_id)


def maybe_kill(point: str, batch_id: int, spark: SparkSession) -> None:
    if not armed(point, batch_id):
        return
    log.warning("fault injection: SIGKILL at %s of batch %d", point, batch_id)
    jvm_pid = int(jvm(spark).java.lang.ProcessHandle.current().pid())
    os.kill(jvm_pid, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
