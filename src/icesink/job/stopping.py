"""Stopping the job on SIGTERM or SIGINT (Ctrl-C) between batches, and aborting on a second one.

The first signal asks the query to stop: a batch in progress finishes its commit (one that is
waiting out an outage is abandoned before it commits anything), a batch that had not begun is
abandoned, and the job prints what it committed last and exits 0. A second signal exits at once;
that is still safe: the next run replays the batch that was in progress and the tables drop what
they already hold.

The signal can reach either process of the driver: Python (`icesink run`, a supervisor that
signals it) or the JVM (under spark-submit the JVM is the parent; systemd signals every process
of a unit). Both are caught: Python's own handlers, and a JVM handler (`sun.misc.Signal`) that
calls back into Python. One Ctrl-C or one systemd stop reaches both processes, so a signal within
a second of the first is the same stop, not the second one.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import ClassVar

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SAME_STOP_S = 1.0
SIGNALS = {"TERM": signal.SIGTERM, "INT": signal.SIGINT}


class StopSignals:
    """What the signals asked for: `requested` is set by the first; the second calls `abort`."""

    def __init__(self, abort: Callable[[int], object] = os._exit, clock: Callable[[], float] = time.monotonic) -> None:
        self.requested = threading.Event()
        self.name: str | None = None  # the first signal's name, e.g. SIGTERM
        self._first_at: float | None = None
        self._lock = threading.RLock()  # a Python handler can run while the main thread holds it
        self._abort = abort
        self._clock = clock

    def receive(self, signum: int) -> None:
        now = self._clock()
        with self._lock:
            first = self._first_at is None
            if first:
                self._first_at, self.name = now, signal.Signals(signum).name
            elif self._first_at is not None and now - self._first_at < SAME_STOP_S:
                return  # the same stop, delivered to the other process of the driver
        if first:
            log.warning(
                "%s: stopping after the current batch commits (a batch not begun is left for the next run); "
                "send it again to abort at once",
                self.name,
            )
            self.requested.set()
            return
        log.warning(
            "%s again: aborting now; the next run replays the batch in progress and the tables drop what they hold",
            signal.Signals(signum).name,
        )
        logging.shutdown()
        self._abort(128 + signum)


class _JvmHandler:
    """A `sun.misc.SignalHandler` in Python (py4j calls it from the JVM's signal thread)."""

    def __init__(self, stop: StopSignals, signum: int) -> None:
        self._stop, self._signum = stop, signum

    def handle(self, _signal: object) -> None:
        self._stop.receive(self._signum)

    class Java:
        implements: ClassVar[list[str]] = ["sun.misc.SignalHandler"]


def install(stop: StopSignals, spark: SparkSession) -> None:
    """Routes SIGTERM and SIGINT, in Python and in the JVM, to `stop`. Call from the main thread."""
    for signum in SIGNALS.values():
        signal.signal(signum, lambda s, _frame: stop.receive(s))
    from pyspark.java_gateway import ensure_callback_server_started

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    ensure_callback_server_started(spark.sparkContext._gateway)  # type: ignore[no-untyped-call]
    for name, signum in SIGNALS.items():
        try:
            # A signal the JVM was started ignoring (pyspark's JVM ignores SIGINT) stays ignored.
            jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal(name), _JvmHandler(stop, signum))
        except Exception as e:  # a JVM that refuses (e.g. -Xrs): Python's handler still works
            log.warning("cannot catch SIG%s in the JVM (%s); a SIG%s sent to the JVM ends it at once", name, e, name)
