"""The foreachBatch handler: one micro-batch of Kafka records into its tables, exactly once per table.

It only orders the steps, each a module of this package (plan, route, decode, prepare, write, dead
letters, commit), runs a batch again while a service is unreachable, and records the steps' timings.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from icesink.batch.commit import commit_batch, commit_group
from icesink.batch.context import BatchContext
from icesink.batch.dead_letters import bad_sources, refuse_bad_records, write_dead_letters
from icesink.batch.decode import bad_records
from icesink.batch.decode.records import decode_tables
from icesink.batch.decode.records import guess as guess_rows
from icesink.batch.direct_letters import letter_records
from icesink.batch.direct_rounds import write_direct
from icesink.batch.direct_tables import split_direct
from icesink.batch.new_schemas import second_passes
from icesink.batch.plan import plan_tables
from icesink.batch.prepare import ready_tables
from icesink.batch.ranges import input_ranges
from icesink.batch.route import TopicRouting, route_batch
from icesink.batch.route_guess import RouteGuess, guess_held, guess_routing, routing_again
from icesink.batch.route_tasks import route_in_tasks
from icesink.batch.sources import table_sources
from icesink.batch.write import write_tables
from icesink.config import Config, ErrorPolicy
from icesink.errors import BatchAbandonedError
from icesink.iceberg.commit import CommitResult
from icesink.model import PartitionRange, TableRef, TopicPartition
from icesink.runtime import faults, retries
from icesink.runtime.timings import BatchTimings, SparkJobs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LastCommit:
    """What the job committed last: a batch, its tables' snapshots, the offsets it reached."""

    batch_id: int
    tables: list[CommitResult]
    next_offsets: dict[TopicPartition, int]


class BatchHandler:
    """Called by Spark with each micro-batch; see `__call__` for the ordered steps."""

    def __init__(self, spark: SparkSession, config: Config, query_id: Callable[[], str]) -> None:
        self._ctx = BatchContext.build(spark, config)
        self._query_id = query_id
        # Set when a batch fails, so the CLI can print our message rather than a py4j trace.
        self.failure: BaseException | None = None
        # Called once after the first batch is handled (the job retires a reset's starting offsets).
        self.after_batch: Callable[[], None] | None = None
        # Called with each handled batch's step timings (also logged at INFO).
        self.on_timings: Callable[[BatchTimings], None] | None = None
        # Called after each batch that committed, with its timings and what it committed (metrics).
        self.on_committed: Callable[[BatchTimings, LastCommit], None] | None = None
        # Called right after a batch's commits, on its thread (the job's table maintenance).
        self.on_commits: Callable[[list[CommitResult]], None] | None = None
        # Set when the job is asked to stop: a batch that has not begun is abandoned (Spark
        # replays it on the next run), one in progress commits.
        self.stopping = threading.Event()
        self._state = threading.Lock()
        self._busy = False
        self.last_batch: int | None = None  # the last batch handled (committed, or empty)
        self.last_commit: LastCommit | None = None

    def table_changed(self, ref: TableRef) -> None:
        """Another commit of the job's own (its maintenance) changed `ref`: loaded for the next batch."""
        self._ctx.catalog.kept.forget(ref)

    @property
    def dead_letter_ref(self) -> TableRef:
        return self._ctx.dead_letter_ref

    def idle(self) -> bool:
        """Whether no batch is in progress; once `stopping` is set, none begins after this says so."""
        with self._state:
            return not self._busy

    def close(self) -> None:
        """Releases what the handler keeps between batches (the consumer group's client)."""
        if self._ctx.group_progress is not None:
            self._ctx.group_progress.close()
        self._ctx.tables.close()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Commits one micro-batch. The steps, in order:

        1. plan (ranges.py, plan.py, route.py): the batch's offset range per topic-partition, from
           Spark's Kafka source (no scan); route each topic to its tables by the routing rules
           (field-routed topics: decode the field once and route each record, or plan with the
           values they held before and let the one-pass job's tasks route them, route_guess.py,
           the batch planned again if they meet another); read each table's
           committed offsets; records below them are already in the table and are dropped
           (replays, lost checkpoints, resets); a table that takes only some of the batch's
           topic-partitions reads just its own offset ranges from Kafka (sources.py);
        2. decode (decode/records.py): per table, with a guess when the table exists (Avro: the
           writer schemas its topics carried last time; JSON: the table's columns), else after a
           look at the records (registry ids, inferred JSON types), parse every record with the
           table's (evolved) schema; for upsert/changelog tables, classify each change; a record
           that does not decode is a dead letter, or fails the whole batch before anything is
           written (`on_error: fail`); one the guess does not cover is pending. Before this, plain
           JSON and plain Avro append tables take steps 2 to 4 at once (direct.py): one Spark job
           decodes and writes all of them in Python (a new table is created once its files are
           written); a table it declines a record of goes this way;
        3. prepare (prepare.py): create missing tables (format v2) and evolve their schemas, each
           change its own metadata commit, idempotently;
        4. write (write.py, files.py, new_schemas.py, dead_letters.py): executors write Parquet data
           (and equality-delete) files, for every table and the dead letters, and return
           descriptors with the files' footers, never rows; pending records get a second pass
           (the table evolved first) whose files join the first pass's;
        5. commit (commit.py): the dead-letter table first, then ONE snapshot per table (an append,
           or a RowDelta), each with its new offsets, query id and batch id in the summary, refused
           if its offsets moved meanwhile.
        Spark writes its own commit log after this returns; a crash before that replays the batch,
        and step 1 drops what step 5 already committed.
        """
        with self._state:
            if self.stopping.is_set():
                self.failure = BatchAbandonedError(f"batch {batch_id}: not begun, the job is stopping")
                raise self.failure
            self._busy = True
        try:
            self._run_until_reachable(batch, batch_id)
        except BaseException as e:
            self.failure = e
            raise
        finally:
            self._busy = False
        self.last_batch = batch_id
        if self.after_batch is not None:
            done, self.after_batch = self.after_batch, None
            done()

    def _run_until_reachable(self, batch: DataFrame, batch_id: int) -> None:
        """`_run`, run again while a service it needs is unreachable (see `retries`), so an outage
        of the catalog, S3 or the registry holds the stream instead of ending it. The batch keeps
        its offset range, so memory stays bounded however long the outage lasts."""
        limit = self._ctx.config.job.retry_unreachable_for_s
        deadline = time.monotonic() + limit
        attempt = 0
        while True:
            try:
                self._run(batch, batch_id)
                if attempt:
                    log.info("batch %d: committed after %d retr%s", batch_id, attempt, "y" if attempt == 1 else "ies")
                return
            except Exception as e:
                # What the failed run committed, or another writer did, is read from the tables again.
                self._ctx.catalog.kept.forget_all()
                attempt += 1
                wait = retries.backoff_seconds(attempt)
                if not retries.is_transient(e) or time.monotonic() + wait > deadline:
                    if retries.is_transient(e):
                        log.error("batch %d: still failing after %d s: %s", batch_id, limit, retries.brief(e))
                    raise
                log.warning(
                    "batch %d: %s; nothing of it is lost, running it again in %.0f s (attempt %d, for up to %d s)",
                    batch_id, retries.brief(e), wait, attempt + 1, limit,
                )  # fmt: skip
                if self.stopping.wait(wait):  # asked to stop while waiting: the next run replays it
                    raise BatchAbandonedError(
                        f"batch {batch_id}: abandoned while waiting out {retries.brief(e)}; the job is stopping"
                    ) from e

    def _run(self, batch: DataFrame, batch_id: int) -> None:
        timings = BatchTimings(batch_id)
        jobs, requests = SparkJobs(batch.sparkSession), self._ctx.catalog.requests
        persisted: list[DataFrame] = []
        try:
            self._steps(batch, batch_id, timings, persisted)
            if timings.records:  # not for an empty batch
                timings.spark_jobs, timings.catalog_requests = jobs.count(), self._ctx.catalog.requests - requests
                log.info("%s", timings.line())
                if self.on_timings is not None:
                    self.on_timings(timings)
                last = self.last_commit
                if self.on_committed is not None and last is not None and last.batch_id == batch_id:
                    try:
                        self.on_committed(timings, last)
                    except Exception as e:  # metrics never fail a committed batch
                        log.warning("batch %d: metrics not updated: %s", batch_id, e)
                faults.maybe_kill("after-commit", batch_id, self._ctx.spark)
        finally:
            for frame in persisted:
                frame.unpersist()

    def _tell_commits(self, results: list[CommitResult], batch_id: int) -> None:
        if self.on_commits is None:
            return
        try:
            self.on_commits(results)
        except Exception as e:  # maintenance never fails a committed batch
            log.warning("batch %d: table maintenance not told of its commits: %s", batch_id, e)

    def _steps(self, batch: DataFrame, batch_id: int, timings: BatchTimings, persisted: list[DataFrame]) -> None:
        ctx = self._ctx
        # 1. plan
        ranges = input_ranges(batch)
        timings.lap("ranges")
        if not ranges:
            log.info("batch %d: empty", batch_id)
            return
        faults.maybe_pause("before-plan", batch_id)
        field_routed = any(ctx.router.route(t).field is not None for t in {r.tp.topic for r in ranges})
        if field_routed:  # the routing pass reads the records, then the tables do
            persisted.append(batch.persist(StorageLevel.MEMORY_AND_DISK))
        # Plain JSON and Avro field-routed topics are routed by the Python tasks: by the one-pass
        # job's, the batch planned with the values they held before (route_guess.py), or by a pass
        # of their own (route_tasks.py); the others by Spark's pass.
        guess = guess_routing(ctx, ranges, batch_id) if field_routed else None
        if guess is not None:
            in_tasks = guess.routing
        else:
            in_tasks = route_in_tasks(ctx, ranges, batch_id) if field_routed else {}
            ctx.routed_before.learn(batch_id, {topic: found.values for topic, found in in_tasks.items()})
        self._routed(batch, batch_id, timings, persisted, ranges, field_routed, in_tasks, guess)

    def _routed(
        self, batch: DataFrame, batch_id: int, timings: BatchTimings, persisted: list[DataFrame],
        ranges: list[PartitionRange], field_routed: bool, in_tasks: dict[str, TopicRouting], guess: RouteGuess | None,
    ) -> None:  # fmt: skip
        """The batch's steps once its field-routed topics' values are known, or guessed (`guess`)."""
        ctx = self._ctx
        targets = route_batch(batch, ranges, ctx.router, ctx.decoder, ctx.table_exists, ctx.dead_letter_ref, in_tasks)
        persisted.extend(targets.persisted)
        plans = plan_tables(ctx, targets.ranges)
        todo = []
        for plan, table in plans:
            if plan.has_new_records:
                todo.append((plan, table, guess_rows(ctx, plan, table)))
            else:
                log.info("batch %d: table %s already holds these offsets, skipped", batch_id, plan.table)
        query_id = self._query_id()
        direct, todo = split_direct(ctx, targets, todo)
        timings.lap("plan")
        # 2 to 4 at once for plain JSON and Avro tables (direct.py); the tables it declines go on below.
        one_pass = write_direct(ctx, targets, direct, ranges, batch_id, query_id, guess)
        if guess is not None and one_pass.refuted is not None:  # nothing committed: the batch planned again
            timings.lap("direct")
            in_tasks = routing_again(ctx, ranges, batch_id, guess, one_pass.refuted, one_pass.routing)
            return self._routed(batch, batch_id, timings, persisted, ranges, field_routed, in_tasks, None)
        if guess is not None and one_pass.routing is not None:
            unmet = guess_held(ctx, batch_id, targets, guess, one_pass.routing)
            todo = [t for t in todo if t[0].table not in unmet]
        written_direct = one_pass.written
        todo += one_pass.declined
        if direct:
            timings.lap("direct")
            if written_direct and len(written_direct) + len(todo) > 1:  # files written, nothing committed
                faults.maybe_kill("mid-write", batch_id, ctx.spark)
        sources = table_sources(ctx, targets, len(ranges), [(p, g) for p, _, g in todo], cached=field_routed)
        persisted.extend(sources.persisted)
        # Spark's path's steps are timed only for a batch that takes it: a batch the one-pass job
        # wrote whole shows no decode, prepare or write step (tests assert it).
        lap = timings.lap if todo else (lambda step: None)
        lap("plan")
        # 2. decode
        work = decode_tables(ctx, sources.records, todo)
        lap("decode")
        unrouted = [(f"(unrouted: {topic})", frame) for topic, frame in targets.unrouted]
        # Every file is written before anything is committed: a failure while writing leaves
        # orphan files only, and the whole batch is retried.
        refuse = ctx.config.decode.on_error is ErrorPolicy.FAIL
        if refuse:
            refuse_bad_records([(str(w.plan.table), bad_records(w.decoded)) for w in work] + unrouted, batch_id)
        # 3. prepare
        ready = ready_tables(ctx, work)
        lap("prepare")
        # 4. write (a second pass for the records a guess did not cover)
        written = write_tables(ctx, ready, ranges, batch_id, query_id)
        written = written_direct + second_passes(ctx, written, ranges, batch_id, query_id, refuse)
        lap("write")
        dead = None
        if not refuse:
            letters = {f"(unrouted: {topic})": list(found) for topic, found in targets.unrouted_letters.items()}
            bad = bad_sources(work, written, [*unrouted, *one_pass.letters, *letter_records(ctx, letters)])
            dead = write_dead_letters(ctx, bad, ranges, batch_id, query_id)
        timings.lap("dead_letters")
        # 5. commit
        results = commit_batch(ctx, dead, written, batch_id, query_id)
        timings.lap("commit")
        log.info(
            "batch %d: %d record(s) from %d topic-partition(s), %d row(s) to %d table(s) in %.1fs",
            batch_id, sum(r.records for r in ranges), len(ranges), sum(r.records for r in results),
            len(results), timings.total,
        )  # fmt: skip
        self.last_commit = LastCommit(batch_id, results, {r.tp: r.last_offset + 1 for r in ranges})
        self._tell_commits(results, batch_id)
        commit_group(ctx.group_progress, ranges, batch_id)
        timings.lap("group")
        timings.records = sum(r.records for r in ranges)
