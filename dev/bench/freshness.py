"""Freshness, shared by icesink's and Spark's sink's runs: a query with a processing-time trigger
while another process produces at a steady rate, then each record's latency from its Kafka
timestamp to the commit of the snapshot that holds it.

icesink's snapshots carry the offsets they cover; Spark's sink's do not, so its rows are traced to
the snapshot that added their data file (the `_file` column and the `entries` table), and to their
Kafka record by `id` (unique in the steady input)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

from dev.bench import REPO
from dev.bench.measure import worker_command
from dev.bench.spec import WorkerSpec
from dev.bench.workloads import SCHEMA
from dev.kit.endpoints import KAFKA
from dev.kit.kafka import end_offsets
from icesink.model import TopicPartition

# Warm-up records (ids from here, apart from the steady input's) make the table and run the first,
# cold batch before the steady load starts, as for a job that has been running: a freshness figure
# is about the steady state, not the start-up.
WARM_UP_RECORDS = 1_000
WARM_FIRST_ID = 10**9


def warm_up(
    topic: str, committed: Callable[[dict[TopicPartition, int]], bool], variant: str = "avro"
) -> dict[int, int]:
    """Produces the warm-up records and waits until `committed` (given the topic's end offsets)
    says the query holds them; returns the first offset of the steady input per partition."""
    from dev.bench.workloads import load

    load(topic, variant, WARM_UP_RECORDS, first=WARM_FIRST_ID)
    ends = end_offsets(topic)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if committed(ends):
                return {tp.partition: end for tp, end in ends.items()}
        except Exception:  # the table is not created before the first batch
            pass
        time.sleep(0.5)
    raise SystemExit(f"freshness warm-up: {WARM_UP_RECORDS} records on {topic} not committed in 300 s")


def steady_input(spec: WorkerSpec) -> dict[TopicPartition, int]:
    """Produces `spec.rate` records/s for `spec.seconds` (in another process, so the producer's
    CPU is not the worker's); returns the topic's end offsets."""
    # Let the first (empty) batches and the JIT settle before the steady load starts.
    time.sleep(max(5.0, 2 * spec.interval))
    subprocess.run(worker_command("produce", spec.to_json()), check=True, cwd=REPO)
    return end_offsets(spec.topic)


def wait_until(done: Callable[[], bool], failed: Callable[[], bool], interval: int) -> None:
    """Until the query has committed the whole input, failed, or plainly fallen behind."""
    deadline = time.monotonic() + 120 + 3 * interval
    while time.monotonic() < deadline and not failed():
        try:
            if done():
                return
        except Exception:  # e.g. the table is not created before the first batch with records
            pass
        time.sleep(1)


def kafka_records(spark: Any, topic: str) -> Any:
    """The topic's records: partition, offset, value and Kafka timestamp (epoch seconds, `ts`)."""
    from pyspark.sql import functions as F

    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", KAFKA)
        .option("subscribe", topic)
        .load()
        .select("partition", "offset", "value", F.col("timestamp").cast("double").alias("ts"))
    )


def steady_records(spark: Any, topic: str, since: dict[int, int]) -> Any:
    """The topic's records from the steady input on (the warm-up's left out)."""
    from pyspark.sql import functions as F

    first = F.element_at(F.create_map(*[F.lit(x) for kv in since.items() for x in kv]), F.col("partition"))
    return kafka_records(spark, topic).where(F.col("offset") >= F.coalesce(first, F.lit(0)))


def input_span(spark: Any, topic: str, since: dict[int, int]) -> float:
    """Seconds from the first to the last record of the steady input: the achieved input rate's
    denominator (a producer that cannot keep up with `--rates` takes longer than `--seconds`)."""
    from pyspark.sql import functions as F

    row = steady_records(spark, topic, since).agg((F.max("ts") - F.min("ts")).alias("span")).first()
    return float(row.span or 0.0)


def commit_offset(spark: Any, table: str, topic: str, since: dict[int, int], interval: int) -> float | None:
    """Median seconds from a trigger's start to the commit of its snapshot, over the snapshots of
    the steady input: Spark starts processing-time triggers on multiples of the interval since the
    epoch, so a snapshot's commit time past the last multiple is how long its trigger took to
    commit. The part of the freshness a sink controls (the rest is the wait for the next trigger),
    and much steadier from run to run than the records' latencies."""
    from pyspark.sql import functions as F

    first = steady_records(spark, topic, since).agg(F.min("ts")).first()[0]
    if first is None:
        return None
    snaps = spark.sql(f"SELECT CAST(committed_at AS DOUBLE) AS t FROM {table}.snapshots").collect()
    offsets = sorted(r.t % interval for r in snaps if r.t >= first)
    return offsets[len(offsets) // 2] if offsets else None


def offset_latencies(spark: Any, table: str, topic: str, since: dict[int, int]) -> list[float]:
    """icesink: for every record of the steady input, the commit time of the snapshot whose offsets
    first cover it, minus its Kafka timestamp (seconds)."""
    from icesink.iceberg import snapshot_offsets as codec

    snaps = spark.sql(f"SELECT committed_at, summary FROM {table}.snapshots ORDER BY committed_at").collect()
    records = steady_records(spark, topic, since).drop("value").toPandas()
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


def file_latencies(spark: Any, table: str, topic: str) -> list[float]:
    """Spark's sink: for every row, the commit time of the snapshot that added its data file,
    minus its record's Kafka timestamp (seconds)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    rows = spark.sql(f"SELECT id, _file AS file FROM {table}")
    files = spark.sql(f"SELECT data_file.file_path AS file, snapshot_id FROM {table}.entries")
    snaps = spark.sql(f"SELECT snapshot_id, CAST(committed_at AS DOUBLE) AS committed FROM {table}.snapshots")
    decoded = from_avro(F.expr("substring(value, 6)"), json.dumps(SCHEMA))
    records = kafka_records(spark, topic).select(decoded.getField("id").alias("id"), "ts")
    records = records.where(F.col("id") < WARM_FIRST_ID)
    joined = rows.join(files, "file").join(snaps, "snapshot_id").join(records, "id")
    return [float(r.latency) for r in joined.select((F.col("committed") - F.col("ts")).alias("latency")).collect()]
