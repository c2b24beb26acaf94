"""The icesink runs of a worker process (catch-up and freshness), and the worker's entry point."""

from __future__ import annotations

import datetime as dt
import logging
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from dev.bench import CATALOG, REPO
from dev.bench.measure import emit, tree_cpu, worker_command
from dev.bench.spec import WorkerSpec
from dev.kit.endpoints import CATALOG_URI, KAFKA, REGISTRY_URL, S3_ENDPOINT
from dev.kit.kafka import end_offsets


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
            "max_offsets_per_trigger": max_per_trigger,
            **extra.pop("kafka", {}),
        },
        "catalog": {"name": CATALOG, "uri": CATALOG_URI},
        "s3": {"endpoint": S3_ENDPOINT},
        "tables": {"namespace": namespace},
        "decode": {"format": "json" if variant == "json" else "avro", "operation_column": "op"},
        "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": "false", "spark.driver.memory": "3g"}},
    }
    if variant != "json":
        raw["decode"]["registry"] = {"url": REGISTRY_URL}
    if variant == "cdc":
        raw["tables"].update({"mode": "changelog", "key_columns": ["id"]})
    return parse_config(raw, environ={})


def session(tmp: Path) -> Any:
    from icesink.job.session import build_session

    spark = build_session(icesink_config(tmp, "x", "bench", "avro", 1))
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def collector(into: list[dict[str, Any]]) -> Any:
    """An `on_timings` hook collecting each batch's step timings."""

    def collect(t: Any) -> None:
        into.append({"records": t.records, "total": t.total, **t.steps})

    return collect


def run_icesink(spark: Any, tmp: Path, spec: WorkerSpec) -> None:
    """A warm-up run on the warm-up topic, then `repeat` timed catch-up runs, each into a fresh table."""
    from icesink.job.query import Job

    logging.basicConfig(level=logging.WARNING)
    for i in range(-1, spec.repeat):
        warm = i < 0
        topic = spec.warm_topic if warm else spec.topic
        ns = f"{spec.tag}_{spec.variant}_{uuid.uuid4().hex[:6]}"
        kafka = {"starting_offsets": spec.starting_offsets} if spec.starting_offsets and not warm else {}
        cfg = icesink_config(tmp, topic, ns, spec.variant, spec.max_per_trigger, kafka=kafka)
        job = Job(spark, cfg)
        batches: list[dict[str, Any]] = []
        job.handler.on_timings = collector(batches)
        started, cpu = time.perf_counter(), tree_cpu()
        job.run()
        seconds, cpu = time.perf_counter() - started, tree_cpu() - cpu
        if job.handler.failure is not None:
            raise SystemExit(f"icesink run failed: {job.handler.failure}")
        table = f"{CATALOG}.{ns}.{topic}"
        rows = spark.sql(f"SELECT count(*) FROM {table}").first()[0]
        if warm:
            continue
        emit(kind="run", seconds=seconds, cpu=cpu, records=spec.records, rows=rows, batches=batches, table=table)


def run_freshness(spark: Any, tmp: Path, spec: WorkerSpec) -> None:
    """icesink with a processing-time trigger while a separate process produces at a steady rate."""
    from icesink.iceberg import snapshot_offsets as codec
    from icesink.job.query import Job

    logging.basicConfig(level=logging.WARNING)
    ns = f"{spec.tag}_fresh_{uuid.uuid4().hex[:6]}"
    trigger = {"mode": "processing-time", "interval": f"{spec.interval} seconds"}
    cfg = icesink_config(tmp, spec.topic, ns, "avro", 0, trigger=trigger, kafka={"max_offsets_per_trigger": None})
    job = Job(spark, cfg)
    batches: list[dict[str, Any]] = []
    job.handler.on_timings = collector(batches)
    query = job.start()
    # Let the first (empty) batches and the JIT settle before the steady load starts.
    time.sleep(max(5.0, 2 * spec.interval))
    subprocess.run(worker_command("produce", spec.to_json()), check=True, cwd=REPO)
    ends = end_offsets(spec.topic)
    table = f"{CATALOG}.{ns}.{spec.topic}"
    deadline = time.monotonic() + 120 + 3 * spec.interval
    while time.monotonic() < deadline and job.handler.failure is None:
        try:
            rows = spark.sql(f"SELECT summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()
        except Exception:
            rows = []
        got = codec.from_summary(rows[0].summary) if rows else None
        if got is not None and all(got.get(tp, 0) >= end for tp, end in ends.items()):
            break
        time.sleep(1)
    query.stop()
    if job.handler.failure is not None:
        raise SystemExit(f"freshness run failed: {job.handler.failure}")
    latencies = commit_latencies(spark, table, spec.topic)
    emit(kind="freshness", interval=spec.interval, rate=spec.rate, latencies=latencies, batches=batches)


def commit_latencies(spark: Any, table: str, topic: str) -> list[float]:
    """For every record: the commit time of the snapshot whose offsets first cover it, minus its
    Kafka timestamp (seconds)."""
    from pyspark.sql import functions as F

    from icesink.iceberg import snapshot_offsets as codec

    snaps = spark.sql(f"SELECT committed_at, summary FROM {table}.snapshots ORDER BY committed_at").collect()
    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", KAFKA)
        .option("subscribe", topic)
        .load()
        .select("partition", "offset", F.col("timestamp").cast("double").alias("ts"))
        .toPandas()
    )
    out: list[float] = []
    prev: dict[int, int] = {}
    for s in snaps:
        got = codec.from_summary(s.summary)
        if got is None:
            continue
        committed = s.committed_at.replace(tzinfo=dt.UTC).timestamp()
        for tp, nxt in got.items():
            lo = prev.get(tp.partition, 0)
            part = records[(records.partition == tp.partition) & (records.offset >= lo) & (records.offset < nxt)]
            out += list(committed - part.ts)
            prev[tp.partition] = nxt
    return out


def worker(spec: WorkerSpec) -> None:
    """One measurement in this process's own SparkSession (so its peak memory is its own)."""
    from dev.bench.baselines import run_baseline

    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        spark = session(Path(tmp))
        if spec.kind == "icesink":
            run_icesink(spark, Path(tmp), spec)
        elif spec.kind == "freshness":
            run_freshness(spark, Path(tmp), spec)
        else:
            run_baseline(spark, Path(tmp), spec)
        spark.stop()
