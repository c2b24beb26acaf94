"""Table maintenance that never breaks exactly-once: compaction, manifest rewrite, snapshot
expiry, orphan removal.

Runs Iceberg's Spark procedures, safe next to a running job:
- compaction (`rewrite_data_files`, `delete-file-threshold` 1) commits with the starting sequence
  number, so equality deletes the job commits meanwhile still apply to the rewritten rows; a
  conflict (the job touched the same files) is retried on fresh metadata. Its snapshot carries no
  offsets; the job and `offsets show` read the newest one that does.
- the delete files compaction left dangling (applying to no live row) are removed in a snapshot of
  their own (iceberg/dangling.py: Iceberg's own removal skips unpartitioned tables);
- the manifests are rewritten (`rewrite_manifests`): the job's appends add one each, as Spark's
  streaming sink does, and a query plans over all of them; like compaction, a snapshot without
  offsets, retried on a conflict;
- expiry never removes the newest offset-bearing snapshot, nor anything newer;
- orphan removal only takes files older than a safe age (files of a batch being written now are
  young, and the job commits them within one batch);
- on a catalog that serves a table's current snapshot only (Nessie), each of these commits is
  followed by a snapshot that carries the offsets again (iceberg/offsets_marker.py).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pyspark.sql import SparkSession

from icesink.config.maintenance import AGE
from icesink.errors import MaintenanceError, UsageError
from icesink.iceberg import dangling, offsets_marker
from icesink.iceberg.tables import IcebergCatalog
from icesink.model import TableRef
from icesink.runtime import faults

log = logging.getLogger(__name__)
_CONFLICT_MARKERS = ("CommitFailedException", "ValidationException", "Cannot commit", "conflict")
T = TypeVar("T")


@dataclass(frozen=True)
class MaintenanceResult:
    table: str
    rewritten_data_files: int
    added_data_files: int
    rewritten_manifests: int
    removed_delete_files: int
    live_delete_files: int  # after the removal
    expired_snapshots: int
    orphan_files: int
    attempts: int
    seconds: float
    steps: dict[str, float] = field(default_factory=dict)  # seconds per step, in their order


def _ts(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _offset_snapshot_time(spark: SparkSession, catalog: str, ref: TableRef) -> dt.datetime | None:
    """Commit time of the newest snapshot on the current snapshot's ancestry that carries offsets:
    the one the job and `offsets show` read the table's offsets from."""
    iceberg = IcebergCatalog(spark, catalog)
    table = iceberg.load(ref)
    found = iceberg.newest_offsets(table) if table is not None else None
    if found is None:
        return None
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=int(found.snapshot.timestampMillis()))


def maintain_table(
    spark: SparkSession,
    catalog: str,
    ref: TableRef,
    expire_after: dt.timedelta,
    orphans_after: dt.timedelta | None,
    attempts: int = 5,
    run: int | None = None,
    full: bool = True,
    job_commits: offsets_marker.JobCommits | None = None,
    concurrent_groups: int | None = None,
) -> MaintenanceResult:
    """Compacts `ref` and removes the deletes that dangle then; with `full`, also rewrites its
    manifests, expires its snapshots older than `expire_after` and (unless `orphans_after` is
    None: the job's own runs leave that listing to `icesink maintain`) removes orphan files older
    than `orphans_after`. `run`: the job's count of its maintenance runs (fault injection's id);
    `job_commits`: the job's own commits, for the offsets marker (offsets_marker.py);
    `concurrent_groups`: file groups compacted at once (None: Iceberg's default, 5)."""
    started = time.monotonic()
    # Catalog-qualified: a bare `ns.table` makes Spark look for a catalog named `ns` first.
    ident = ref.qualified(catalog)
    # Beside a stream, each group compacted at once is a Spark job of its own whose tasks take the
    # batches' task slots (the job's runs: one group at a time, `maintenance.concurrent_groups`).
    concurrent = "" if concurrent_groups is None else f"'max-concurrent-file-group-rewrites', '{concurrent_groups}', "
    options = (
        f"map('delete-file-threshold', '1', 'min-input-files', '2', {concurrent}"
        # Dangling deletes are removed after this, by iceberg/dangling.py for every table (Iceberg's
        # own removal skips unpartitioned ones): one removal, one count.
        "'remove-dangling-deletes', 'false', 'partial-progress.enabled', 'false')"
    )
    steps: dict[str, float] = {}
    lap = _lap(steps)
    compaction = f"CALL {catalog}.system.rewrite_data_files(table => '{ident}', options => {options})"
    rewrite, attempt = _keeping_offsets(
        spark, catalog, ref, job_commits, lambda: _retried(spark, ref, "compaction", compaction, attempts), run
    )
    lap("compaction")
    if run is not None:
        faults.maybe_kill("maintenance-compacted", run, spark)
        faults.maybe_pause("maintenance-compacted", run)
    removed = _keeping_offsets(spark, catalog, ref, job_commits, lambda: _remove_dangling(spark, catalog, ref))
    lap("dangling_deletes")
    manifests: Any = None
    expired: dict[str, Any] = {}
    orphans = 0
    if full:
        manifests, expired, orphans = _tidy(
            spark, catalog, ref, expire_after, orphans_after, attempts, lap, job_commits
        )
    return MaintenanceResult(
        table=str(ref),
        rewritten_data_files=int(rewrite.rewritten_data_files_count) if rewrite else 0,
        added_data_files=int(rewrite.added_data_files_count) if rewrite else 0,
        rewritten_manifests=int(manifests.rewritten_manifests_count) if manifests else 0,
        removed_delete_files=removed.removed,
        live_delete_files=removed.live_delete_files - removed.removed,
        # One manifest list per snapshot.
        expired_snapshots=int(expired.get("deleted_manifest_lists_count") or 0),
        orphan_files=orphans,
        attempts=attempt,
        seconds=time.monotonic() - started,
        steps=steps,
    )


def _tidy(
    spark: SparkSession, catalog: str, ref: TableRef, expire_after: dt.timedelta, orphans_after: dt.timedelta | None,
    attempts: int, lap: Callable[[str], None], job_commits: offsets_marker.JobCommits | None,
) -> tuple[Any, dict[str, Any], int]:  # fmt: skip
    """The manifests rewritten, the snapshots expired and the orphan files removed (their rows/count)."""
    ident = ref.qualified(catalog)
    rewrite = f"CALL {catalog}.system.rewrite_manifests(table => '{ident}')"
    manifests, _ = _keeping_offsets(
        spark, catalog, ref, job_commits, lambda: _retried(spark, ref, "the manifest rewrite", rewrite, attempts)
    )
    lap("manifests")
    now = dt.datetime.now(dt.UTC)
    older_than = now - expire_after
    keep_from = _offset_snapshot_time(spark, catalog, ref)
    if keep_from is not None and keep_from < older_than:
        older_than = keep_from  # the newest offset-bearing snapshot and all after it stay
    expired: dict[str, Any] = {}
    # Nothing that old: the procedure would still read every manifest of every snapshot to find
    # files to delete (11-18 s for 1,800 snapshots beside a running job).
    oldest = spark.sql(f"SELECT CAST(min(committed_at) AS DOUBLE) FROM {ident}.snapshots").first()
    if oldest is not None and oldest[0] is not None and oldest[0] < older_than.timestamp():
        expired_row = spark.sql(
            f"CALL {catalog}.system.expire_snapshots(table => '{ident}', older_than => TIMESTAMP '{_ts(older_than)}', "
            "retain_last => 1)"
        ).first()
        expired = expired_row.asDict() if expired_row is not None else {}
    lap("expiry")
    if orphans_after is None:
        return manifests, expired, 0
    orphans = spark.sql(
        f"CALL {catalog}.system.remove_orphan_files(table => '{ident}', "
        # prefix_listing: list through the table's FileIO (S3FileIO), not a Hadoop file system.
        f"older_than => TIMESTAMP '{_ts(now - orphans_after)}', prefix_listing => true)"
    ).collect()
    lap("orphans")
    return manifests, expired, len(orphans)


def _lap(steps: dict[str, float]) -> Callable[[str], None]:
    """Records each step's seconds since the one before it (or since this was made)."""
    last = [time.monotonic()]

    def lap(step: str) -> None:
        now = time.monotonic()
        steps[step] = round(now - last[0], 3)
        last[0] = now

    return lap


def _keeping_offsets(
    spark: SparkSession, catalog: str, ref: TableRef, job_commits: offsets_marker.JobCommits | None,
    step: Callable[[], T], run: int | None = None,
) -> T:  # fmt: skip
    """`step` (a maintenance commit), then the offsets marker where the catalog needs one (`run`:
    the job's maintenance run, whose fault point is between them)."""
    iceberg = IcebergCatalog(spark, catalog)
    table = iceberg.load(ref)
    was = offsets_marker.before(table, job_commits) if table is not None else None
    done = step()
    if run is not None:
        faults.maybe_pause("maintenance-before-marker", run)
    if was is not None and table is not None:
        offsets_marker.keep_visible(spark, table, was, str(ref), job_commits)
    return done


def _remove_dangling(spark: SparkSession, catalog: str, ref: TableRef) -> dangling.Removed:
    table = IcebergCatalog(spark, catalog).load(ref)
    if table is None:
        raise MaintenanceError(f"table {ref}: not found")
    try:
        return dangling.remove_dangling_deletes(spark, ref.qualified(catalog), table)
    except Exception as e:
        first = str(e).splitlines()[0]
        raise MaintenanceError(f"table {ref}: removing dangling delete files failed: {first}") from None


def _retried(spark: SparkSession, ref: TableRef, what: str, call: str, attempts: int) -> tuple[Any, int]:
    """(the procedure's first row, the attempt it took): run again when it conflicted with a
    commit of the job (or anything else) on the same table."""
    for attempt in range(1, attempts + 1):
        try:
            return spark.sql(call).first(), attempt
        except Exception as e:
            if attempt == attempts or not any(m in str(e) for m in _CONFLICT_MARKERS):
                raise MaintenanceError(f"table {ref}: {what} failed: {str(e).splitlines()[0]}") from None
            log.info("table %s: %s conflicted with a concurrent commit, retrying (%d/%d)", ref, what, attempt, attempts)
            time.sleep(min(2.0 * attempt, 10.0))
    raise AssertionError("unreachable")


def parse_age(text: str) -> dt.timedelta:
    """`90m`, `12h`, `3d` -> timedelta."""
    m = AGE.match(text)
    if m is None:
        raise UsageError(f"{text!r} is not an age such as 90m, 12h or 3d")
    units = {"m": "minutes", "h": "hours", "d": "days"}
    return dt.timedelta(**{units[m.group(2)]: int(m.group(1))})
