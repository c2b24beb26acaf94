"""icesink's runs in a worker process (catch-up, freshness, tiny and empty batches), and the worker's
entry point."""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from dev.bench import CATALOG
from dev.bench.freshness import commit_offset, input_span, offset_latencies, steady_input, wait_until, warm_up
from dev.bench.measure import emit, tree_cpu, trigger_phases, written
from dev.bench.spec import BATCH_COUNTS, EMPTY_CALLS, WorkerSpec
from dev.kit.endpoints import CATALOG_URI, KAFKA, REGISTRY_URL, S3_ENDPOINT

# The Kafka source's columns (with headers, as the job reads them): an empty micro-batch's schema.
KAFKA_SOURCE = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key:string,value:binary>>"
)


def icesink_config(tmp: Path, topic: str, namespace: str, variant: str, max_per_trigger: int, **extra: Any) -> Any:
    from icesink.config import parse_config

    raw: dict[str, Any] = {
        "job": {
            "name": f"bench-{namespace}",
            "checkpoint_location": str(tmp / f"cp-{namespace}"),
            "trigger": extra.pop("trigger", {"mode": "available-now"}),
        },
        "kafka": {
            "bootstrap_servers": KAFKA,
            "subscribe_pattern": f"^{topic}$",
            "max_offsets_per_trigger": max_per_trigger or None,  # 0: the job's default
            **extra.pop("kafka", {}),
        },
        "catalog": {"name": CATALOG, "uri": CATALOG_URI},
        "s3": {"endpoint": S3_ENDPOINT},
        "tables": {"namespace": namespace},
        "decode": {
            "format": "json" if variant in ("json", "debezium-json", "json-grouped") else "avro",
            "operation_column": "op",
        },
        "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": "false", "spark.driver.memory": "3g"}},
    }
    if variant not in ("json", "debezium-json", "json-grouped"):
        raw["decode"]["registry"] = {"url": REGISTRY_URL}
    if variant == "cdc":
        raw["tables"].update({"mode": "changelog", "key_columns": ["id"]})
    if variant == "debezium":  # keyed by the Avro record key's fields, as Debezium's users run it
        raw["decode"].update({"envelope": "debezium", "key_format": "avro", "source_columns": ["ts_ms", "lsn"]})
        raw["tables"].update({"mode": "changelog"})
    if variant == "debezium-json":  # JsonConverter's defaults: Connect JSON keys and values
        raw["decode"].update({"envelope": "debezium", "key_format": "json", "source_columns": ["ts_ms", "lsn"]})
        raw["tables"].update({"mode": "changelog"})
    raw["tables"].update(extra.pop("tables", {}))
    if extra.get("routing"):
        raw["routing"] = {"rules": extra.pop("routing")}
    extra.pop("routing", None)
    raw["decode"].update(extra.pop("decode", {}))
    return parse_config(raw, environ={})


def session(tmp: Path) -> Any:
    from icesink.job.session import build_session

    spark = build_session(icesink_config(tmp, "x", "bench", "avro", 1))
    spark.sparkContext.setLogLevel("ERROR")
    # Spark's sinks report their batches only through the query's progress: keep all of a run's.
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "10000")
    return spark


def collector(into: list[dict[str, Any]]) -> Any:
    """An `on_timings` hook collecting each batch's step timings and counts."""

    def collect(t: Any) -> None:
        counts = {k: getattr(t, k, None) for k in BATCH_COUNTS}
        into.append({"records": t.records, "total": t.total, **t.steps, **counts})

    return collect


def totals(batches: list[dict[str, Any]], key: str) -> int | None:
    """The run's total of a per-batch count, None unless every batch counted it."""
    values = [b.get(key) for b in batches]
    return sum(v for v in values if v is not None) if values and None not in values else None


def run_icesink(spark: Any, tmp: Path, spec: WorkerSpec) -> None:
    """A warm-up run on the warm-up topic (if any), then `repeat` timed catch-up runs, each into a
    fresh table."""
    from icesink.job.query import Job

    logging.basicConfig(level=logging.WARNING)
    for i in range(-1 if spec.warm_topic else 0, spec.repeat):
        warm = i < 0
        topic = spec.warm_topic if warm else spec.topic
        ns = f"{spec.tag}_{spec.variant.replace('-', '_')}_{uuid.uuid4().hex[:6]}"  # an identifier
        kafka = {"starting_offsets": spec.starting_offsets} if spec.starting_offsets and not warm else {}
        cfg = icesink_config(
            tmp,
            topic,
            ns,
            spec.variant,
            spec.max_per_trigger,
            kafka=kafka,
            tables=spec.tables,
            decode=spec.decode,
            routing=spec.routing,
        )
        job = Job(spark, cfg)
        batches: list[dict[str, Any]] = []
        job.handler.on_timings = collector(batches)
        started, cpu = time.perf_counter(), tree_cpu()
        job.run()
        seconds, cpu = time.perf_counter() - started, tree_cpu() - cpu
        if job.handler.failure is not None:
            raise SystemExit(f"icesink run failed: {job.handler.failure}")
        if warm:
            continue
        cold = process_figures() if spec.cold else {}  # before the reads below
        names = [topic]
        if spec.routing:  # the tables the field named
            found = [r.tableName for r in spark.sql(f"SHOW TABLES IN {CATALOG}.{ns}").collect()]
            names = sorted(n for n in found if n != "dead_letters")
        tables = [f"{CATALOG}.{ns}.{n}" for n in names]
        rows = sum(spark.sql(f"SELECT count(*) FROM {t}").first()[0] for t in tables)
        files = [written(spark, t) for t in tables]
        emit(kind="run", seconds=seconds, cpu=cpu, records=spec.records, rows=rows, batches=batches, **cold,
             n_batches=len(batches), spark_jobs=totals(batches, "spark_jobs"),
             catalog_requests=totals(batches, "catalog_requests"), table=", ".join(tables),
             **{k: sum(f[k] for f in files) for k in files[0]})  # fmt: skip


def process_figures() -> dict[str, float]:
    """Seconds and CPU-seconds of this worker's process tree from its start (its SparkSession's too)."""
    import psutil

    return {"process_seconds": time.time() - psutil.Process().create_time(), "process_cpu": tree_cpu()}


def run_small(spark: Any, tmp: Path, spec: WorkerSpec) -> None:
    """Tiny batches (their timings), then the batch handler on empty micro-batches. No warm-up run:
    the median of ~20 batches already leaves out the first, cold ones."""
    run_icesink(spark, tmp, spec)
    emit(kind="empty", seconds=empty_batch_seconds(spark, tmp, spec))


def empty_batch_seconds(spark: Any, tmp: Path, spec: WorkerSpec) -> list[float]:
    """Seconds of each of EMPTY_CALLS calls of a fresh batch handler with an empty micro-batch: what
    a processing-time trigger pays whenever Kafka has nothing new."""
    from icesink.batch.handler import BatchHandler

    ns = f"{spec.tag}_empty_{uuid.uuid4().hex[:6]}"
    handler = BatchHandler(spark, icesink_config(tmp, spec.topic, ns, "avro", spec.max_per_trigger), lambda: "bench")
    empty = spark.createDataFrame([], KAFKA_SOURCE)
    out = []
    try:
        for batch_id in range(EMPTY_CALLS):
            started = time.perf_counter()
            handler(empty, batch_id)
            out.append(time.perf_counter() - started)
    finally:
        handler.close()
    return out


def record_maintenance(job: Any) -> list[float]:
    """The seconds of each run of the job's own maintenance that ends from now on (its metrics
    still told): a run under way when the measurement ends is not in it."""
    runs: list[float] = []
    told = job.maintainer.on_run

    def on_run(run: Any) -> None:
        runs.append(round(run.seconds, 2))
        if told is not None:
            told(run)

    job.maintainer.on_run = on_run
    return runs


def run_freshness(spark: Any, tmp: Path, spec: WorkerSpec) -> None:
    """icesink with a processing-time trigger while a separate process produces at a steady rate."""
    from icesink.iceberg import snapshot_offsets as codec
    from icesink.job.query import Job

    logging.basicConfig(level=logging.WARNING)
    ns = f"{spec.tag}_fresh_{uuid.uuid4().hex[:6]}"
    trigger = {"mode": "processing-time", "interval": f"{spec.interval} seconds"}
    cfg = icesink_config(tmp, spec.topic, ns, spec.variant, 0, trigger=trigger, kafka={"max_offsets_per_trigger": None},
                         tables=spec.tables)  # fmt: skip
    job = Job(spark, cfg)
    batches: list[dict[str, Any]] = []
    job.handler.on_timings = collector(batches)
    query = job.start()
    maintained = record_maintenance(job)
    table = f"{CATALOG}.{ns}.{spec.topic}"

    def holds(ends: dict[Any, int]) -> bool:
        rows = spark.sql(f"SELECT summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()
        got = codec.from_summary(rows[0].summary) if rows else None
        return got is not None and all(got.get(tp, 0) >= end for tp, end in ends.items())

    since = warm_up(spec.topic, holds, spec.variant)
    batches.clear()  # the warm-up's
    maintained.clear()
    warm_triggers = len(query.recentProgress)
    ends = steady_input(spec)
    wait_until(lambda: holds(ends), lambda: job.handler.failure is not None, spec.interval)
    phases = trigger_phases(query, warm_triggers)
    query.stop()
    if job.handler.failure is not None:
        raise SystemExit(f"freshness run failed: {job.handler.failure}")
    latencies = offset_latencies(spark, table, spec.topic, since)
    emit(kind="freshness", interval=spec.interval, rate=spec.rate, latencies=latencies, batches=batches,
         span=input_span(spark, spec.topic, since), phases=phases, maintenance=maintained,
         commit_offset=commit_offset(spark, table, spec.topic, since, spec.interval))  # fmt: skip


def worker(spec: WorkerSpec) -> None:
    """One measurement in this process's own SparkSession (so its peak memory is its own); the
    Kafka Connect sink's in its own worker JVM (no Spark)."""
    from dev.bench import baselines
    from dev.bench.kc_sink import run_kc_sink

    if spec.kind == "kc-sink":
        run_kc_sink(spec)
        return

    runs = {
        "icesink": run_icesink,
        "freshness": run_freshness,
        "small": run_small,
        "builtin-freshness": baselines.run_builtin_freshness,
    }
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        spark = session(Path(tmp))
        runs.get(spec.kind, baselines.run_baseline)(spark, Path(tmp), spec)
        spark.stop()
