"""Table maintenance inside the job: after its commits, a table that gathered too many delete files
(or commits) is compacted, its dangling deletes removed, its manifests rewritten and its old
snapshots expired (ops/maintain.py, what `icesink maintain` runs, orphan removal aside), on a
thread of its own, one table at a time.

On a thread, not between batches: a compaction takes seconds of Spark jobs, which would hold
every batch behind it; beside the batches it costs them a share of the cores instead. Its commits
and the job's never make each other fail: the compaction commits with its starting sequence
number (the equality deletes the job commits meanwhile still apply to the rewritten rows), its
snapshots carry no offsets (the job reads its offsets from the newest snapshot that does), and a
commit of the job that meets a maintenance commit lands on top of it (the table-by-table path
refreshes; the one request falls back to it). A run that fails is logged and counted, the job
goes on, and the table is tried again at a later commit, after `maintenance.min_interval_s`.

After each run the maintenance rests (`maintenance.max_share`), the tables whose commits came
meanwhile waiting their turn: the ones never maintained first, then the longest since their run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from icesink.config import Config
from icesink.errors import first_line
from icesink.iceberg import ancestry
from icesink.iceberg.commit import CommitResult
from icesink.iceberg.jvm import JavaObject
from icesink.job.maintenance_due import Due, TableHealth, due, maintained, rest_after, turn
from icesink.model import TableRef
from icesink.ops import maintain as maintenance

log = logging.getLogger(__name__)

_KEPT_COMMITS = 32
_HANDOVER_WAIT_S = 3.0
JOB_GROUP = "icesink-maintenance"  # its Spark jobs: not counted as a batch's, in a scheduler pool of their own
_CLOSE_WAIT_S = 120


@dataclass(frozen=True)
class MaintenanceRun:
    """One maintenance run of the job: its table, why, and what it did (or why it failed)."""

    table: TableRef
    reason: str
    result: maintenance.MaintenanceResult | None
    error: str | None = None
    seconds: float = 0.0


class Maintainer:
    """Maintains the job's tables on a thread of its own; `committed` hands it each batch's commits."""

    def __init__(self, spark: SparkSession, config: Config, skip: TableRef, running: Callable[[], bool]) -> None:
        self._spark = spark
        self._running = running  # whether the job's query still runs
        self._config = config
        self._skip = skip  # the dead-letter table: an append log nobody reads by key
        self._which: dict[TableRef, bool] = {}  # whether the job maintains a table (`_maintained`)
        self._expire_after = maintenance.parse_age(config.maintenance.expire_after)
        self._health: dict[TableRef, TableHealth] = {}
        self._resting_until = 0.0  # monotonic: no run before it (maintenance.max_share), set and read under _wake
        self._newest: dict[TableRef, CommitResult] = {}  # commits not yet looked at, newest per table
        # The job's last commits per table (their Java snapshots, read on this thread only): what a
        # compaction re-applied on top of one of them carries again (iceberg/offsets_marker.py).
        self._commits: dict[TableRef, deque[JavaObject]] = {}
        self._wake = threading.Condition()
        self._closing = False
        self._thread: threading.Thread | None = None
        self.runs = 0
        # Called with each finished run (metrics).
        self.on_run: Callable[[MaintenanceRun], None] | None = None
        # Called with each table a run may have committed to (the batches' kept tables).
        self.on_table_changed: Callable[[TableRef], None] | None = None

    def _maintained(self, ref: TableRef) -> bool:
        # Asked for each table of each batch: a table's settings do not change while the job runs.
        found = self._which.get(ref)
        if found is None:
            settings = self._config.tables.settings_for(ref.name)
            found = self._which[ref] = ref != self._skip and maintained(settings, self._config.maintenance.tables)
        return found

    def committed(self, results: Sequence[CommitResult]) -> None:
        """A batch's commits (on the batch's thread: no catalog or Spark call here)."""
        mine = [r for r in results if self._maintained(r.table)]
        if not mine:
            return
        with self._wake:
            if self._closing:
                return
            for r in mine:
                self._newest[r.table] = r
                if r.snapshot is not None:
                    self._commits.setdefault(r.table, deque(maxlen=_KEPT_COMMITS)).append(r.snapshot)
                self._health.setdefault(r.table, TableHealth()).commits += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="icesink-maintenance", daemon=True)
                self._thread.start()
            self._wake.notify()

    def resume(self) -> None:
        """Takes commits again after `close` (a job run again in the same process)."""
        with self._wake:
            if self._thread is not None and not self._thread.is_alive():
                self._thread = None
            self._closing = False

    def close(self) -> None:
        """Starts no other run; waits for the one under way (its commit or none: both are safe)."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(_CLOSE_WAIT_S)
            if self._thread.is_alive():
                log.warning("maintenance of a table still running after %d s; leaving it", _CLOSE_WAIT_S)

    def _loop(self) -> None:
        sc = self._spark.sparkContext
        sc.setLocalProperty("spark.scheduler.pool", JOB_GROUP)
        sc.setJobGroup(JOB_GROUP, "icesink: table maintenance", interruptOnCancel=False)
        while True:
            with self._wake:
                while not self._closing and not (self._newest and time.monotonic() >= self._resting_until):
                    self._wake.wait(max(0.0, self._resting_until - time.monotonic()) if self._newest else None)
                if self._closing:
                    return
                newest, self._newest = self._newest, {}
            order = sorted(newest, key=lambda ref: turn(self._health.get(ref), str(ref)))
            for n, ref in enumerate(order):
                with self._wake:
                    if self._closing:
                        return
                    if time.monotonic() < self._resting_until:
                        # A run of this pass began a rest: the tables after it wait for its end,
                        # their commits kept (a newer one the batches handed over meanwhile wins).
                        for later in order[n:]:
                            self._newest.setdefault(later, newest[later])
                        break
                if not self._running():  # a query stopped without Job.run (tests, embedders)
                    with self._wake:
                        self._closing = True
                    return
                self._consider(ref, newest[ref])

    def _consider(self, ref: TableRef, result: CommitResult) -> None:
        health = self._health[ref]
        try:
            deletes, partitions = _figures(result)
        except Exception as e:  # the figures are only hints; the commit count still applies
            log.debug("table %s: live delete files not read from its snapshot: %s", ref, e)
        else:
            health.live_delete_files = deletes
            health.partitions = max(health.partitions, partitions)
        wanted = due(health, self._config.maintenance, time.monotonic())
        if wanted is None:
            return
        self.runs += 1
        run = self._run(ref, wanted, self.runs)
        health.last_run = time.monotonic()
        rest = rest_after(run.seconds, self._config.maintenance.max_share)
        with self._wake:
            self._resting_until = health.last_run + rest
        if rest >= 1:
            log.info("maintenance rests %.0f s (maintenance.max_share: %s)", rest, self._config.maintenance.max_share)
        if wanted.full:
            health.commits = 0
        if run.result is not None:
            health.live_delete_files = run.result.live_delete_files
        if self.on_run is not None:
            try:
                self.on_run(run)
            except Exception as e:  # metrics never stop maintenance
                log.debug("maintenance metrics: %s", e)

    def _run(self, ref: TableRef, wanted: Due, number: int) -> MaintenanceRun:
        what = "compacting, removing dangling deletes"
        if wanted.full:
            what += f", rewriting manifests, expiring snapshots older than {self._config.maintenance.expire_after}"
        log.info("maintenance of %s: %s; %s", ref, wanted.reason, what)
        reason = wanted.reason
        started = time.monotonic()
        try:
            result = maintenance.maintain_table(
                self._spark, self._config.catalog.name, ref, self._expire_after, None, run=number, full=wanted.full,
                job_commits=lambda sequence: self._job_commit(ref, sequence),
                concurrent_groups=self._config.maintenance.concurrent_groups,
            )  # fmt: skip
        except Exception as e:
            self._changed(ref)
            first = first_line(e)
            log.warning("maintenance of %s failed (the job goes on; tried again at a later commit, after %d s): %s",
                        ref, self._config.maintenance.min_interval_s, first)  # fmt: skip
            return MaintenanceRun(ref, reason, None, first, time.monotonic() - started)
        done = [
            f"{result.rewritten_data_files} data file(s) rewritten into {result.added_data_files}",
            f"{result.removed_delete_files} dangling delete file(s) removed ({result.live_delete_files} live)",
        ]
        if wanted.full:
            done += [f"{result.rewritten_manifests} manifest(s) rewritten",
                     f"{result.expired_snapshots} snapshot(s) expired"]  # fmt: skip
        self._changed(ref)
        steps = ", ".join(f"{k} {v:.1f}s" for k, v in result.steps.items())
        log.info("maintenance of %s done in %.1f s (%s): %s", ref, result.seconds, steps, ", ".join(done))
        return MaintenanceRun(ref, reason, result, None, time.monotonic() - started)

    def _changed(self, ref: TableRef) -> None:
        if self.on_table_changed is not None:
            self.on_table_changed(ref)

    def _job_commit(self, ref: TableRef, sequence: int) -> dict[str, str] | None:
        """icesink's summary properties of the job's commit of `sequence` on `ref`; waited for a
        moment (the batch hands its commits over once all its tables are committed)."""
        deadline = time.monotonic() + _HANDOVER_WAIT_S
        while True:
            with self._wake:
                kept = list(self._commits.get(ref, ()))
            for snapshot in reversed(kept):
                if int(snapshot.sequenceNumber()) == sequence:
                    return ancestry.summary(snapshot) or None
            if time.monotonic() > deadline:
                return None
            time.sleep(0.1)


def _figures(result: CommitResult) -> tuple[int | None, int]:
    """The table's live delete files after the commit, and the partitions the commit changed, from
    its snapshot's summary."""
    if result.snapshot is None:
        return None, 1
    summary = result.snapshot.summary()
    total, changed = summary.get("total-delete-files"), summary.get("changed-partition-count")
    return (int(total) if total is not None else None), (int(changed) if changed is not None else 1)
