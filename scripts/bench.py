"""End-to-end benchmark: icesink against the seed-000 pipeline and Spark's own Iceberg sink, in one run.

  scripts/bench.py [--records 2000000] [--repeat 3] [--out bench-results] [--only PART,...]

Needs the local stack (`scripts/stack up`; endpoints from `scripts/stack env`). It pre-loads fresh
topics (2 partitions each) with N records: Confluent-wire-format Avro values (~200 bytes, 18 fields
with timestamp-millis, date, decimal and uuid, the schema registered in the Schema Registry), the
same records as JSON, and a keyed CDC stream (70% insert, 25% update, 5% delete over skewed keys, an
`op` field). Then, each approach in its own Spark process (local[2]) so peak memory is its own:

  icesink-avro / -json   catch-up throughput into an append table (available-now, N records)
  icesink-cdc            the same into a changelog table (equality deletes + rows, one RowDelta)
  seed000                seed 000's pipeline: a pandas_udf calling confluent-kafka's
                         AvroDeserializer(schema_str=None) per row, appended each batch with
                         Spark's Iceberg writer (foreachBatch + writeTo().append())
  builtin                Spark's Iceberg streaming sink (writeStream.format("iceberg"), append)
                         after a JVM from_avro on the value with the 5-byte header stripped
  freshness              icesink at a steady input rate with a 1 s and a 10 s processing-time
                         trigger: latency from each record's Kafka timestamp to the commit
                         timestamp of the snapshot that holds it (p50, p99)
  sweep                  icesink-avro throughput across maxOffsetsPerTrigger sizes (PNG)

Every catch-up approach reads the same topic with the same maxOffsetsPerTrigger, after a warm-up
run (JVM, Python workers, registry cache) in the same process, each run into a fresh table. For
icesink it also collects the per-batch step timings of the batch handler (Kafka read + planning
aggregate, plan, decode, dead letters, prepare, write, commit), and for every approach the peak
RSS of the driver JVM and of the Python workers (the process tree, sampled every 0.2 s).

It writes report.json, report.md and sweep.png into --out and prints the summary. Figures taken
while other work runs on the machine are noisy: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from decimal import Decimal
from io import BytesIO
from pathlib import Path
from typing import Any

import pandas as pd  # module level: pandas_udf reads the UDF's type hints from its globals

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.bench_decode import SCHEMA  # noqa: E402  (the same ~200-byte event as the decode benchmark)
from tests.conftest import CATALOG_URI, KAFKA, REGISTRY_URL, S3_ENDPOINT  # noqa: E402
from tests.integration.helpers import SERDE_CONF, create_topics, end_offsets, registry_client  # noqa: E402

CATALOG = "icesink"
PARTS = ("icesink-avro", "icesink-json", "icesink-cdc", "seed000", "builtin", "freshness", "sweep")
TARGETS = {
    "append_records_s": 100_000,
    "vs_builtin": 1.0,
    "vs_seed000": 3.0,
    "cdc_vs_append": 0.5,
    "freshness_p50_s_1s_trigger": 3.0,
    "overhead_s": 0.3,
}

CDC_SCHEMA: dict[str, Any] = {
    **SCHEMA,
    "name": "Change",
    "fields": [*SCHEMA["fields"], {"name": "op", "type": "string"}],
}
BASE = dt.datetime(2024, 1, 2, tzinfo=dt.UTC)


def event(i: int, key: int | None = None) -> dict[str, Any]:
    k = i if key is None else key
    return {
        "id": k, "user_id": i % 50_000, "session": f"{i:08x}-0000-4000-8000-{k:012x}",
        "event_type": ("view", "cart", "purchase")[i % 3], "ts": BASE + dt.timedelta(milliseconds=i),
        "day": dt.date(2024, 1, 2) + dt.timedelta(days=i % 7), "amount": Decimal(i % 100_000) / 100,
        "currency": "EUR", "country": ("DE", "FR", "JP", "US")[i % 4], "device": "mobile",
        "os": ("ios", "android")[i % 2], "app_version": "3.14.1", "price": i * 0.25, "quantity": i % 7,
        "promoted": i % 5 == 0, "note": None if i % 4 else f"note {i}",
        "page_url": f"https://shop.example.com/catalog/item/{i % 9973}?ref=home",
        "user_agent": f"Mozilla/5.0 (Linux; Android 14) App/3.14.{i % 10}",
    }  # fmt: skip


def as_json(e: dict[str, Any]) -> bytes:
    out = dict(e)
    out["ts"] = int(e["ts"].timestamp() * 1000)
    out["day"] = e["day"].isoformat()
    out["amount"] = float(e["amount"])
    return json.dumps(out, separators=(",", ":")).encode()


class AvroWriter:
    """Confluent wire format: registers the schema under {topic}-value through confluent-kafka's
    AvroSerializer once, then frames fastavro bodies with its id (the same bytes, faster)."""

    def __init__(self, topic: str, schema: dict[str, Any]) -> None:
        import fastavro
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        ser = AvroSerializer(registry_client(), json.dumps(schema), conf=SERDE_CONF)
        sample = event(0) if schema is SCHEMA else {**event(0), "op": "I"}
        first = ser(sample, SerializationContext(topic, MessageField.VALUE))
        assert first is not None
        self.header = first[:5]
        self.schema_id = int.from_bytes(first[1:5], "big")
        self._parsed = fastavro.parse_schema(schema)
        self._write = fastavro.schemaless_writer
        assert self(sample) == first

    def __call__(self, record: dict[str, Any]) -> bytes:
        buf = BytesIO()
        buf.write(self.header)
        self._write(buf, self._parsed, record)
        return buf.getvalue()


def producer() -> Any:
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": KAFKA,
            "enable.idempotence": True,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
        }
    )


def send(p: Any, topic: str, value: bytes, key: bytes | None, partition: int) -> None:
    while True:
        try:
            p.produce(topic, value=value, key=key, partition=partition)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            p.poll(0.2)


def load(topic: str, variant: str, n: int, first: int = 0) -> float:
    """Produces records first..first+n of a variant; returns the mean value size."""
    p = producer()
    size = 0
    if variant == "cdc":
        writer = AvroWriter(topic, CDC_SCHEMA)
        for i, (key, op) in enumerate(cdc_changes(n, seed=7)):
            v = writer({**event(i, key), "op": op})
            size += len(v)
            send(p, topic, v, str(key).encode(), key % 2)
    else:
        writer = AvroWriter(topic, SCHEMA)
        for i in range(first, first + n):
            e = event(i)
            v = writer(e) if variant == "avro" else as_json(e)
            size += len(v)
            send(p, topic, v, None, i % 2)
    assert p.flush(120) == 0, f"records to {topic} not delivered"
    return size / max(n, 1)


def cdc_changes(n: int, seed: int) -> list[tuple[int, str]]:
    """(key, op): 70% inserts of new keys, 25% updates and 5% deletes of skewed existing keys (a
    tenth of the keys get about half of the updates and deletes)."""
    rng = random.Random(seed)
    out: list[tuple[int, str]] = []
    next_key = 0
    for _ in range(n):
        r = rng.random()
        if r < 0.70 or next_key == 0:
            out.append((next_key, "I"))
            next_key += 1
            continue
        hot = rng.random() < 0.5
        key = rng.randrange(max(1, next_key // 10)) if hot else rng.randrange(next_key)
        out.append((key, "U" if r < 0.95 else "D"))
    return out


# ---------------------------------------------------------------------------------------- workers


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


def tree_cpu() -> float:
    """CPU seconds of this process and its descendants (driver JVM, Python workers), counting the
    ones that ended through their parents."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def emit(**fields: Any) -> None:
    print("BENCH " + json.dumps(fields, default=str), flush=True)


def collector(into: list[dict[str, Any]]) -> Any:
    def collect(t: Any) -> None:
        into.append({"records": t.records, "total": t.total, **t.steps})

    return collect


def run_icesink(spark: Any, tmp: Path, spec: dict[str, Any]) -> None:
    import logging

    from icesink.job.query import Job

    logging.basicConfig(level=logging.WARNING)
    for i in range(-1, spec["repeat"]):
        warm = i < 0
        topic = spec["warm_topic"] if warm else spec["topic"]
        ns = f"{spec['tag']}_{spec['variant']}_{uuid.uuid4().hex[:6]}"
        kafka = {"starting_offsets": spec["starting_offsets"]} if spec.get("starting_offsets") and not warm else {}
        cfg = icesink_config(tmp, topic, ns, spec["variant"], spec["max_per_trigger"], kafka=kafka)
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
        emit(kind="run", seconds=seconds, cpu=cpu, records=spec["records"], rows=rows, batches=batches, table=table)


def seed000_udf(schema: Any, url: str) -> Any:
    """Seed 000's decoder: a pandas_udf calling confluent-kafka's AvroDeserializer(schema_str=None)
    per row, one deserializer per Python worker; a record that fails becomes a row of nulls (the
    seed's behaviour, kept here so the work is the same)."""
    from pyspark.sql.functions import pandas_udf

    state: dict[str, Any] = {}

    def deserializer() -> Any:
        if "d" not in state:
            from confluent_kafka.schema_registry import SchemaRegistryClient
            from confluent_kafka.schema_registry.avro import AvroDeserializer

            state["d"] = AvroDeserializer(SchemaRegistryClient({"url": url, "timeout": 10}), schema_str=None)
        return state["d"]

    @pandas_udf(schema)  # type: ignore[call-overload]
    def decode(values: pd.Series) -> pd.DataFrame:
        from confluent_kafka.serialization import MessageField, SerializationContext

        d = deserializer()
        ctx = SerializationContext("bench", MessageField.VALUE)
        rows = []
        for v in values:
            try:
                row = d(bytes(v), ctx)
                row["session"] = str(row["session"])  # fastavro yields uuid.UUID; Arrow wants str
            except Exception:
                row = {f.name: None for f in schema.fields}
            rows.append(row)
        return pd.DataFrame(rows, columns=schema.fieldNames())

    return decode


def avro_struct(spark: Any) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    empty = spark.createDataFrame([], "value binary")
    return empty.select(from_avro(F.col("value"), json.dumps(SCHEMA)).alias("r")).schema["r"].dataType


def kafka_stream(spark: Any, topic: str, max_per_trigger: int) -> Any:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", KAFKA)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_per_trigger))
        .load()
    )


def run_baseline(spark: Any, tmp: Path, spec: dict[str, Any]) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    struct = avro_struct(spark)
    for i in range(-1, spec["repeat"]):
        warm = i < 0
        topic = spec["warm_topic"] if warm else spec["topic"]
        ns = f"{spec['tag']}_{spec['kind']}_{uuid.uuid4().hex[:6]}"
        table = f"{CATALOG}.{ns}.events"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{ns}")
        spark.createDataFrame([], struct).writeTo(table).using("iceberg").tableProperty("format-version", "2").create()
        source = kafka_stream(spark, topic, spec["max_per_trigger"])
        checkpoint = str(tmp / f"cp-{ns}")
        started, cpu = time.perf_counter(), tree_cpu()
        if spec["kind"] == "seed000":
            decode = seed000_udf(struct, REGISTRY_URL)

            def append(batch: Any, _: int, decode: Any = decode, table: str = table) -> None:
                batch.select(decode(F.col("value")).alias("r")).select("r.*").writeTo(table).append()

            query = source.writeStream.option("checkpointLocation", checkpoint).foreachBatch(append)
        else:
            decoded = source.select(from_avro(F.expr("substring(value, 6)"), json.dumps(SCHEMA)).alias("r"))
            query = (
                decoded.select("r.*")
                .writeStream.format("iceberg")
                .outputMode("append")
                .option("checkpointLocation", checkpoint)
            )
        q = query.trigger(availableNow=True).toTable(table) if spec["kind"] == "builtin" else None
        if q is None:
            q = query.trigger(availableNow=True).start()
        q.awaitTermination()
        seconds, cpu = time.perf_counter() - started, tree_cpu() - cpu
        rows = spark.sql(f"SELECT count(*) FROM {table}").first()[0]
        if not warm:
            emit(kind="run", seconds=seconds, cpu=cpu, records=spec["records"], rows=rows, batches=[], table=table)


def run_freshness(spark: Any, tmp: Path, spec: dict[str, Any]) -> None:
    """icesink with a processing-time trigger while a separate process produces at a steady rate."""
    import logging

    from icesink.job.query import Job

    logging.basicConfig(level=logging.WARNING)
    topic = spec["topic"]
    ns = f"{spec['tag']}_fresh_{uuid.uuid4().hex[:6]}"
    trigger = {"mode": "processing-time", "interval": f"{spec['interval']} seconds"}
    cfg = icesink_config(tmp, topic, ns, "avro", 0, trigger=trigger, kafka={"max_offsets_per_trigger": None})
    job = Job(spark, cfg)
    batches: list[dict[str, Any]] = []
    job.handler.on_timings = collector(batches)
    query = job.start()
    # Let the first (empty) batches and the JIT settle before the steady load starts.
    time.sleep(max(5.0, 2 * spec["interval"]))
    cmd = [sys.executable, __file__, "--produce", json.dumps(spec)]
    subprocess.run(cmd, check=True)
    ends = end_offsets(topic)
    table = f"{CATALOG}.{ns}.{topic}"
    deadline = time.monotonic() + 120 + 3 * spec["interval"]
    from icesink.iceberg import snapshot_offsets as codec

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
    latencies = commit_latencies(spark, table, topic)
    emit(kind="freshness", interval=spec["interval"], rate=spec["rate"], latencies=latencies, batches=batches)


def commit_latencies(spark: Any, table: str, topic: str) -> list[float]:
    """For every record: the commit time of the snapshot whose offsets first cover it, minus its
    Kafka timestamp (seconds)."""
    from icesink.iceberg import snapshot_offsets as codec

    snaps = spark.sql(f"SELECT committed_at, summary FROM {table}.snapshots ORDER BY committed_at").collect()
    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", KAFKA)
        .option("subscribe", topic)
        .load()
        .select("partition", "offset", (F_col("timestamp").cast("double")).alias("ts"))
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


def F_col(name: str) -> Any:  # noqa: N802
    from pyspark.sql import functions as F

    return F.col(name)


def produce_steady(spec: dict[str, Any]) -> None:
    """`rate` records/s for `seconds`, in 100 ms slices."""
    p = producer()
    writer = AvroWriter(spec["topic"], SCHEMA)
    rate, seconds = spec["rate"], spec["seconds"]
    per_slice = max(1, rate // 10)
    started = time.monotonic()
    i = 0
    for s in range(int(seconds * 10)):
        for _ in range(per_slice):
            send(p, spec["topic"], writer(event(i)), None, i % 2)
            i += 1
        p.poll(0)
        wait = started + (s + 1) / 10 - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    assert p.flush(60) == 0


def worker(spec: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        spark = session(Path(tmp))
        if spec["kind"] == "icesink":
            run_icesink(spark, Path(tmp), spec)
        elif spec["kind"] == "freshness":
            run_freshness(spark, Path(tmp), spec)
        else:
            run_baseline(spark, Path(tmp), spec)
        spark.stop()


# ----------------------------------------------------------------------------------- orchestrator


def sample_tree(pid: int) -> tuple[int, int, int]:
    """(driver JVM, Python workers, everything) resident bytes of the process tree under `pid`."""
    import psutil

    jvm = workers = total = 0
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0, 0, 0
    java_pids = set()
    for p in procs:
        try:
            rss = p.memory_info().rss
            name = p.name()
        except psutil.Error:
            continue
        total += rss
        if name == "java":
            jvm += rss
            java_pids.add(p.pid)
    for p in procs:
        try:
            if p.name().startswith("python") and any(a.pid in java_pids for a in p.parents()):
                workers += p.memory_info().rss
        except psutil.Error:
            continue
    return jvm, workers, total


def wait_for_stack(timeout_s: float = 900) -> None:
    """Until Kafka, the catalog, S3 and the registry all accept connections (and a few seconds more)."""
    import socket
    from urllib.parse import urlparse

    endpoints = [KAFKA, *(urlparse(u).netloc for u in (CATALOG_URI, S3_ENDPOINT, REGISTRY_URL))]
    deadline = time.monotonic() + timeout_s
    waited = False
    while True:
        down = []
        for hostport in endpoints:
            host, _, port = hostport.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=2):
                    pass
            except OSError:
                down.append(hostport)
        if not down:
            if waited:
                time.sleep(10)  # let a restarted service finish starting
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"stack not reachable: {', '.join(down)}")
        if not waited:
            print(f"    waiting for {', '.join(down)}", flush=True)
        waited = True
        time.sleep(5)


def measure(name: str, spec: dict[str, Any], log: Path, attempts: int = 3) -> dict[str, Any]:
    """`measure_once`, again (after a pause) when it fails: on a shared machine a service of the
    stack may be down for a moment (fault-injection tests stop and start them)."""
    for attempt in range(1, attempts + 1):
        wait_for_stack()
        try:
            return measure_once(name, spec, log)
        except RuntimeError as e:
            if attempt == attempts:
                raise SystemExit(str(e)) from None
            print(f"    {e}; again in 30 s", flush=True)
            time.sleep(30)
    raise AssertionError("unreachable")


def measure_once(name: str, spec: dict[str, Any], log: Path) -> dict[str, Any]:
    """Runs one worker process, sampling its memory; returns its emitted results and peaks."""
    print(f"[{time.strftime('%H:%M:%S')}] {name} ...", flush=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log, "a") as err:
        err.write(f"\n===== {name} {json.dumps(spec)}\n")
        err.flush()
        proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", json.dumps(spec)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
        )
        peaks = [0, 0, 0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                for i, v in enumerate(sample_tree(proc.pid)):
                    peaks[i] = max(peaks[i], v)
                time.sleep(0.2)

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        results = []
        for line in proc.stdout or []:
            if line.startswith("BENCH "):
                r = json.loads(line[6:])
                results.append(r)
                if r["kind"] == "run":
                    print(
                        f"    {r['seconds']:7.1f} s  {r['records'] / r['seconds']:>10,.0f} records/s  "
                        f"{r['records'] / r['cpu']:>9,.0f} records/CPU-s  "
                        f"({r['rows']:,} rows, {len(r['batches'])} batches)",
                        flush=True,
                    )
        rc = proc.wait()
        done.set()
        t.join()
    if rc != 0 or not results:
        raise RuntimeError(f"{name} failed (exit {rc}); see {log}")
    mb = 2**20
    return {
        "results": results,
        "peak_jvm_mb": peaks[0] / mb,
        "peak_workers_mb": peaks[1] / mb,
        "peak_mb": peaks[2] / mb,
    }


def summarize_runs(name: str, measured: dict[str, Any], records: int) -> dict[str, Any]:
    runs = [r for r in measured["results"] if r["kind"] == "run"]
    rates = [records / r["seconds"] for r in runs]
    per_cpu = [records / r["cpu"] for r in runs]
    out: dict[str, Any] = {
        "approach": name,
        "rates": rates,
        "median": statistics.median(rates),
        "per_cpu_s": statistics.median(per_cpu),
        "rows": [r["rows"] for r in runs],
        "peak_jvm_mb": measured["peak_jvm_mb"],
        "peak_workers_mb": measured["peak_workers_mb"],
    }
    batches = [b for r in runs for b in r["batches"]]
    if batches:
        out["batches_per_run"] = statistics.median(len(r["batches"]) for r in runs)
        out["breakdown"] = breakdown(batches)
        out["batch_timings"] = [r["batches"] for r in runs]
    return out


def breakdown(batches: list[dict[str, Any]]) -> dict[str, float]:
    """Median seconds per batch of each step (and of the whole batch)."""
    steps = [k for k in batches[0] if k != "records"]
    return {k: statistics.median(b.get(k, 0.0) for b in batches) for k in steps}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def plot_sweep(points: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [p["max_per_trigger"] for p in points]
    ax.plot(xs, [p["median"] for p in points], marker="o", label="icesink (Avro, append)")
    ax.set_xscale("log")
    ax.set_xlabel("maxOffsetsPerTrigger (records per micro-batch)")
    ax.set_ylabel("records/s")
    ax.set_title("icesink catch-up throughput by trigger size (local[2], whole stack on 2 cores)")
    ax.axhline(TARGETS["append_records_s"], color="grey", linestyle="--", linewidth=1, label="target")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def verdicts(report: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """(target, measured, wanted, met) for each of the issue's targets that this run measured."""
    t, out = report["targets"], []
    thr = report["throughput"]
    ice = thr.get("icesink-avro")
    if ice:
        out.append(("icesink append records/s", f"{ice['median']:,.0f}", f">= {t['append_records_s']:,}",
                    ice["median"] >= t["append_records_s"]))  # fmt: skip
        for other, key in (("builtin", "vs_builtin"), ("seed000", "vs_seed000")):
            if other in thr:
                ratio = ice["median"] / thr[other]["median"]
                out.append((f"icesink / {other}", f"{ratio:.2f}x", f">= {t[key]}x", ratio >= t[key]))
        if "icesink-cdc" in thr:
            ratio = thr["icesink-cdc"]["median"] / ice["median"]
            out.append(("CDC / append", f"{ratio:.2f}x", f">= {t['cdc_vs_append']}x", ratio >= t["cdc_vs_append"]))
        b = ice.get("breakdown", {})
        # Outside Kafka (read) and the commit: planning, decoding on the driver, schema work, dead letters.
        overhead = sum(b.get(k, 0.0) for k in ("plan", "decode", "prepare", "dead_letters", "group"))
        out.append(("per-batch overhead outside Kafka, write and commit", f"{overhead:.2f} s",
                    f"<= {t['overhead_s']} s", overhead <= t["overhead_s"]))  # fmt: skip
    for f in report.get("freshness", []):
        if f["interval"] == 1:
            out.append(("p50 freshness, 1 s trigger", f"{f['p50']:.2f} s", f"<= {t['freshness_p50_s_1s_trigger']} s",
                        f["p50"] <= t["freshness_p50_s_1s_trigger"]))  # fmt: skip
    return out


def markdown(report: dict[str, Any]) -> str:
    r = report
    lines = [
        f"# icesink benchmark, {r['date']}",
        "",
        f"{r['records']:,} records per approach (Avro ~{r['value_bytes']['avro']:.0f} bytes, "
        f"JSON ~{r['value_bytes']['json']:.0f} bytes), maxOffsetsPerTrigger {r['max_per_trigger']:,}, "
        f"median of {r['repeat']} run(s), Spark local[2], whole stack on {os.cpu_count()} cores.",
        "",
        "| approach | median records/s | runs | records per CPU-s | peak RSS driver JVM | peak RSS Python workers |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for a in r["throughput"].values():
        runs = ", ".join(f"{x:,.0f}" for x in a["rates"])
        lines.append(
            f"| {a['approach']} | {a['median']:,.0f} | {runs} | {a['per_cpu_s']:,.0f} | {a['peak_jvm_mb']:,.0f} MB | "
            f"{a['peak_workers_mb']:,.0f} MB |"
        )
    if r["ratios"]:
        lines += ["", "| ratio | value | target |", "| --- | ---: | ---: |"]
        for k, (v, target) in r["ratios"].items():
            lines.append(f"| {k} | {v:.2f}x | {target} |")
    for name, a in r["throughput"].items():
        if "breakdown" in a:
            b = a["breakdown"]
            lines += [
                "",
                f"Per-batch steps of {name} (median seconds per batch, {a['batches_per_run']:.0f} batches per run):",
                "",
                "| " + " | ".join(b) + " |",
                "| " + " | ".join("---:" for _ in b) + " |",
                "| " + " | ".join(f"{v:.2f}" for v in b.values()) + " |",
            ]
    if r.get("freshness"):
        lines += [
            "",
            "| trigger | input rate | records | p50 latency | p99 latency | batch time p50 |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for f in r["freshness"]:
            lines.append(
                f"| {f['interval']} s | {f['rate']:,}/s | {f['records']:,} | {f['p50']:.2f} s | {f['p99']:.2f} s | "
                f"{f['batch_p50']:.2f} s |"
            )
    met = verdicts(r)
    if met:
        lines += ["", "| target | measured | wanted | |", "| --- | ---: | ---: | --- |"]
        lines += [f"| {name} | {got} | {want} | {'met' if ok else 'MISSED'} |" for name, got, want, ok in met]
    if r.get("sweep"):
        lines += ["", "| maxOffsetsPerTrigger | records/s |", "| ---: | ---: |"]
        lines += [f"| {p['max_per_trigger']:,} | {p['median']:,.0f} |" for p in r["sweep"]]
        lines += ["", "![throughput by trigger size](sweep.png)"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000, help="records per variant (default 2M)")
    parser.add_argument("--repeat", type=int, default=3, help="measured runs per approach (median)")
    parser.add_argument("--max-per-trigger", type=int, default=500_000, help="maxOffsetsPerTrigger of catch-up runs")
    parser.add_argument("--sweep", default="25000,100000,250000,500000,1000000", help="maxOffsetsPerTrigger sizes")
    parser.add_argument("--sweep-records", type=int, default=1_000_000, help="records read per sweep run")
    parser.add_argument("--rate", type=int, default=5_000, help="freshness: input records/s")
    parser.add_argument("--seconds", type=int, default=60, help="freshness: seconds of steady input per trigger")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    parser.add_argument("--out", type=Path, default=REPO / "bench-results")
    parser.add_argument("--render", action="store_true", help="only re-render --out/report.md from its report.json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--produce", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    if args.produce:
        produce_steady(json.loads(args.produce))
        return
    if args.render:
        report = json.loads((args.out / "report.json").read_text())
        (args.out / "report.md").write_text(markdown(report))
        print(markdown(report))
        return
    only = [p for p in args.only.split(",") if p]
    unknown = sorted(set(only) - set(PARTS))
    if unknown:
        parser.error(f"--only: unknown part(s) {unknown}")
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "bench.log"
    log.write_text("")
    started = time.perf_counter()
    tag = f"bench_{uuid.uuid4().hex[:6]}"
    n = args.records
    topics = {v: f"{tag}_{v}" for v in ("avro", "json", "cdc", "warm_avro", "warm_json", "warm_cdc")}
    create_topics(*topics.values(), partitions=2)
    need = {"avro"} | ({"json"} if "icesink-json" in only else set()) | ({"cdc"} if "icesink-cdc" in only else set())
    sizes: dict[str, float] = {"avro": 0.0, "json": 0.0}
    for v in sorted(need):
        t0 = time.perf_counter()
        sizes[v] = load(topics[v], v, n)
        load(topics[f"warm_{v}"], v, min(n, 50_000))
        print(f"pre-loaded {n:,} {v} records into {topics[v]} ({sizes[v]:.0f} bytes, {time.perf_counter() - t0:.0f} s)")
    base = {"tag": tag, "records": n, "repeat": args.repeat, "max_per_trigger": args.max_per_trigger}
    throughput: dict[str, Any] = {}
    for part, kind, variant in (
        ("icesink-avro", "icesink", "avro"),
        ("icesink-json", "icesink", "json"),
        ("icesink-cdc", "icesink", "cdc"),
        ("seed000", "seed000", "avro"),
        ("builtin", "builtin", "avro"),
    ):
        if part not in only:
            continue
        spec = {
            **base,
            "kind": kind,
            "variant": variant,
            "topic": topics[variant],
            "warm_topic": topics[f"warm_{variant}"],
        }
        throughput[part] = summarize_runs(part, measure(part, spec, log), n)
    ratios: dict[str, tuple[float, str]] = {}
    ice = throughput.get("icesink-avro")
    if ice:
        for other, target in (("seed000", ">= 3"), ("builtin", ">= 1")):
            if other in throughput:
                ratios[f"icesink-avro / {other}"] = (ice["median"] / throughput[other]["median"], target)
        if "icesink-cdc" in throughput:
            ratios["icesink-cdc / icesink-avro"] = (throughput["icesink-cdc"]["median"] / ice["median"], ">= 0.5")
    freshness = []
    if "freshness" in only:
        for interval in (1, 10):
            topic = f"{tag}_fresh{interval}"
            create_topics(topic, partitions=2)
            spec = {**base, "kind": "freshness", "topic": topic, "interval": interval, "rate": args.rate,
                    "seconds": args.seconds}  # fmt: skip
            m = measure(f"freshness {interval} s", spec, log)
            res = next(r for r in m["results"] if r["kind"] == "freshness")
            lat = res["latencies"]
            busy = [b["total"] for b in res["batches"] if b["records"]]
            f = {"interval": interval, "rate": args.rate, "records": len(lat), "p50": pct(lat, 0.5),
                 "p99": pct(lat, 0.99), "batch_p50": statistics.median(busy) if busy else float("nan"),
                 "breakdown": breakdown([b for b in res["batches"] if b["records"]]) if busy else {},
                 "batches": res["batches"]}  # fmt: skip
            print(f"    trigger {interval} s: p50 {f['p50']:.2f} s, p99 {f['p99']:.2f} s over {len(lat):,} records")
            freshness.append(f)
    sweep = []
    if "sweep" in only:
        s = min(args.sweep_records, n)
        ends = end_offsets(topics["avro"])
        starting = {topics["avro"]: {str(tp.partition): max(0, end - s // 2) for tp, end in ends.items()}}
        for size in [int(x) for x in args.sweep.split(",") if x]:
            spec = {**base, "kind": "icesink", "variant": "avro", "topic": topics["avro"], "records": s,
                    "warm_topic": topics["warm_avro"], "max_per_trigger": size, "repeat": 1,
                    "starting_offsets": json.dumps(starting)}  # fmt: skip
            point = summarize_runs("sweep", measure(f"sweep {size:,}", spec, log), s)
            sweep.append({"max_per_trigger": size, "median": point["median"], "records": s})
        plot_sweep(sweep, args.out / "sweep.png")
    report = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "records": n,
        "repeat": args.repeat,
        "max_per_trigger": args.max_per_trigger,
        "value_bytes": sizes,
        "cores": os.cpu_count(),
        "throughput": throughput,
        "ratios": ratios,
        "freshness": freshness,
        "sweep": sweep,
        "targets": TARGETS,
        "seconds": time.perf_counter() - started,
    }
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    md = markdown(report)
    (args.out / "report.md").write_text(md)
    print()
    print(md)
    print(f"benchmark took {report['seconds'] / 60:.1f} min; report in {args.out}")
    try:
        from confluent_kafka.admin import AdminClient

        AdminClient({"bootstrap.servers": KAFKA}).delete_topics(list(topics.values()))
    except Exception as e:
        print(f"could not delete the benchmark topics: {e}")


if __name__ == "__main__":
    main()
