"""The end-to-end benchmark: icesink against a pandas_udf decoder and Spark's own Iceberg sink.

Needs the local stack (`dev/stack up`; endpoints from `dev/stack env`). It pre-loads fresh topics
(2 partitions each) with N records: Confluent-wire-format Avro values (~200 bytes, 18 fields with
timestamp-millis, date, decimal and uuid, the schema registered in the Schema Registry), the same
records as JSON, and a keyed CDC stream (70% insert, 25% update, 5% delete over skewed keys, an
`op` field). Then, each approach in its own Spark process (local[2]) so peak memory is its own:

  icesink-avro / -json   catch-up throughput into an append table (available-now, N records)
  icesink-cdc            the same into a changelog table (equality deletes + rows, one RowDelta)
  seed000                a pandas_udf calling confluent-kafka's AvroDeserializer(schema_str=None)
                         per row, appended each batch with Spark's Iceberg writer
                         (foreachBatch + writeTo().append())
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

It writes report.json, report.md and sweep.png into --out and prints the summary; `render` turns
report.json into docs/performance.md. Figures taken while other work runs on the machine are
noisy: run it on a quiet machine.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from dev.bench import report as rep
from dev.bench.measure import measure
from dev.bench.spec import CATCH_UP, TARGETS, RunSpec, WorkerSpec
from dev.bench.workloads import load
from dev.kit.endpoints import KAFKA
from dev.kit.kafka import create_topics, end_offsets


def run(spec: RunSpec, out: Path) -> dict[str, Any]:
    """Every part of `spec`, one after the other; returns the report (also written into `out`)."""
    out.mkdir(parents=True, exist_ok=True)
    log = out / "bench.log"
    log.write_text("")
    started, started_at, machine = time.perf_counter(), rep.now(), rep.machine()
    tag = f"bench_{uuid.uuid4().hex[:6]}"
    n = spec.records
    topics = {v: f"{tag}_{v}" for v in ("avro", "json", "cdc", "warm_avro", "warm_json", "warm_cdc")}
    create_topics(*topics.values(), partitions=2)
    sizes: dict[str, float] = {"avro": 0.0, "json": 0.0}
    for v in spec.variants():
        t0 = time.perf_counter()
        sizes[v] = load(topics[v], v, n)
        load(topics[f"warm_{v}"], v, min(n, 50_000))
        print(f"pre-loaded {n:,} {v} records into {topics[v]} ({sizes[v]:.0f} bytes, {time.perf_counter() - t0:.0f} s)")
    base: dict[str, Any] = {"tag": tag, "records": n, "repeat": spec.repeat, "max_per_trigger": spec.max_per_trigger}
    throughput: dict[str, Any] = {}
    for part, (kind, variant) in CATCH_UP.items():
        if part in spec.parts:
            w = WorkerSpec(
                kind=kind, variant=variant, topic=topics[variant], warm_topic=topics[f"warm_{variant}"], **base
            )
            throughput[part] = rep.summarize_runs(part, measure(part, w.to_json(), log), n)
    freshness = []
    if "freshness" in spec.parts:
        for interval in (1, 10):
            topic = f"{tag}_fresh{interval}"
            create_topics(topic, partitions=2)
            w = WorkerSpec(kind="freshness", topic=topic, interval=interval, rate=spec.rate, seconds=spec.seconds,
                           **base)  # fmt: skip
            f = rep.summarize_freshness(measure(f"freshness {interval} s", w.to_json(), log), interval, spec.rate)
            print(f"    trigger {interval} s: p50 {f['p50']:.2f} s, p99 {f['p99']:.2f} s over {f['records']:,} records")
            freshness.append(f)
    sweep = []
    if "sweep" in spec.parts:
        s = min(spec.sweep_records, n)
        ends = end_offsets(topics["avro"])
        starting = {topics["avro"]: {str(tp.partition): max(0, end - s // 2) for tp, end in ends.items()}}
        for size in spec.sweep:
            w = WorkerSpec(kind="icesink", variant="avro", topic=topics["avro"], warm_topic=topics["warm_avro"],
                           tag=tag, records=s, max_per_trigger=size, repeat=1,
                           starting_offsets=json.dumps(starting))  # fmt: skip
            point = rep.summarize_runs("sweep", measure(f"sweep {size:,}", w.to_json(), log), s)
            sweep.append({"max_per_trigger": size, "median": point["median"], "records": s})
        rep.plot_sweep(sweep, TARGETS.append_records_s, out / "sweep.png")
    report = {
        "started": started_at,
        "date": rep.now(),
        "command": shlex.join(["python", "-m", "dev.bench", *sys.argv[1:]]),
        "machine": machine,
        "records": n,
        "repeat": spec.repeat,
        "max_per_trigger": spec.max_per_trigger,
        "value_bytes": sizes,
        "cores": machine["cores"],
        "spec": dataclasses.asdict(spec),
        "throughput": throughput,
        "ratios": rep.ratios(throughput),
        "freshness": freshness,
        "sweep": sweep,
        "targets": dataclasses.asdict(TARGETS),
        "seconds": time.perf_counter() - started,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(rep.markdown(report))
    delete_topics(list(topics.values()))
    return report


def delete_topics(topics: list[str]) -> None:
    try:
        from confluent_kafka.admin import AdminClient

        AdminClient({"bootstrap.servers": KAFKA}).delete_topics(topics)
    except Exception as e:
        print(f"could not delete the benchmark topics: {e}")
