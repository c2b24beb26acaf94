"""The end-to-end benchmark: icesink against a pandas_udf decoder, Spark's own Iceberg sink and the
plain Kafka scan, in one run and one report.

Needs the local stack (`dev/stack up`; endpoints from `dev/stack env`). It pre-loads fresh topics
(2 partitions each) with N records: Confluent-wire-format Avro values (~200 bytes, 18 fields with
timestamp-millis, date, decimal and uuid, the schema registered in the Schema Registry), the same
records as JSON, and a keyed CDC stream (70% insert, 25% update, 5% delete over skewed keys, an
`op` field). Then, each approach in its own Spark process (local[2]) so peak memory is its own:

  icesink-avro / -json   catch-up throughput into an append table (available-now, N records)
  icesink-cdc            the same into a changelog table (equality deletes + rows, one RowDelta)
  icesink-avro-days      icesink-avro into a table partitioned by days(ts)
  icesink-avro-nested    the same records with three more fields, an array of strings, a map of
                         strings and an array of records (line items), into an append table
  icesink-avro-nested-jvm  the same through Spark's from_avro (decode.direct_avro: false)
  icesink-avro-flat      icesink-avro's fields, four of them in a record `client`, two in a nullable
                         record `page`, into a flattened table (tables.flatten_separator: _)
  icesink-avro-flat-jvm  the same through Spark's from_avro (decode.direct_avro: false)
  icesink-json-flat(-jvm)  the same records as JSON objects, one pass (and through Spark's from_json)
  icesink-cdc-bucket     icesink-cdc into a table partitioned by bucket(16, id) (keys from the value)
  icesink-json-upsert    icesink-json into an upsert table keyed by id
  icesink-debezium       the CDC stream as Debezium's Avro change events (record keys, envelopes,
                         a tombstone after each delete) into a changelog table by bucket(16, id)
  icesink-debezium-json  the same change events as JsonConverter writes them with its defaults (the
                         schema in every record, precise decimals, Connect JSON keys)
  icesink-avro-routed, icesink-json-routed
                         icesink-avro and -json routed by the field event_type into a table per
                         value (view, cart, purchase: dynamic routing), the tables' rows summed
  icesink-avro-headers(-jvm)  icesink-avro's records as bare bodies, the schema id in a
                         `__value_schema_id` header, one pass (and through Spark's from_avro)
  seed000                a pandas_udf calling confluent-kafka's AvroDeserializer(schema_str=None)
                         per row, appended each batch with Spark's Iceberg writer
                         (foreachBatch + writeTo().append())
  builtin                Spark's Iceberg streaming sink (writeStream.format("iceberg"), append)
                         after a JVM from_avro on the value with the 5-byte header stripped
  builtin-json           the same sink on the JSON topic, after from_json with the records' fixed
                         schema (the types icesink infers for them)
  noop                   the Avro topic scanned into Spark's noop sink: the physical limit
  noop-debezium-json     the Debezium Connect JSON topic scanned the same way (its records carry
                         their schema: ~18x the Avro records' bytes)
  kc-sink, kc-sink-days, kc-sink-json
                         the Apache Iceberg Kafka Connect sink on the Avro topic (flat, and into a
                         days(ts) table) and on the JSON topic: a standalone worker per run
                         (kc_sink.py), from the connector's creation and from the worker's launch
  icesink-avro-cold, icesink-avro-days-cold, icesink-json-cold
                         icesink-avro, -avro-days and -json, each run in a process of its own with
                         no warm-up: also from the process's start (the sink's counterpart)
  freshness              icesink at each --rates input rate with a 1 s and a 10 s processing-time
                         trigger: latency from each record's Kafka timestamp to the commit
                         timestamp of the snapshot that holds it (p50, p99)
  builtin-freshness      Spark's Iceberg sink the same way, at the 1 s trigger and the same rates
  small                  icesink-avro at maxOffsetsPerTrigger 1,000 over 20,000 records: the end
                         to end time of a tiny batch; then the batch handler called on an empty
                         micro-batch 20 times (medians)
  memory                 icesink-avro, --memory-records records at maxOffsetsPerTrigger 2,000,000
                         (one batch of 2M by default): peak RSS of the driver JVM and the workers
  sweep                  icesink-avro throughput across maxOffsetsPerTrigger sizes (PNG)

Every catch-up approach reads the same topic with the same maxOffsetsPerTrigger, after a warm-up
run (JVM, Python workers, registry cache) in the same process, each run into a fresh table. For
each it records CPU-seconds per million records (the process tree), Spark jobs per batch, bytes of
data files per row written and data files per batch; for icesink also the per-batch step timings
of the batch handler (its steps, as icesink.runtime.timings names them) and its catalog requests;
for every approach the peak RSS of the driver JVM and of the Python workers (the process tree,
sampled every 0.2 s). The report judges each of `Targets` (spec.py) on figures of this run: met,
MISSED, or not measured when `--only` left out its parts.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dev.bench import report as rep
from dev.bench.measure import measure
from dev.bench.spec import (
    CATCH_UP,
    COLD,
    DECODE,
    FRESHNESS_RUNS,
    MEMORY_TRIGGER,
    ROUTING,
    SMALL_RECORDS,
    SMALL_TRIGGER,
    TABLES,
    TARGETS,
    RunSpec,
    WorkerSpec,
)
from dev.bench.workloads import load
from dev.kit.endpoints import KAFKA
from dev.kit.kafka import create_topics, end_offsets


@dataclass
class Bench:
    """What the parts of one run share: its tag, topics (all deleted at the end) and log."""

    spec: RunSpec
    log: Path
    tag: str = field(default_factory=lambda: f"bench_{uuid.uuid4().hex[:6]}")
    topics: dict[str, str] = field(default_factory=dict)

    def base(self) -> dict[str, Any]:
        s = self.spec
        return {"tag": self.tag, "records": s.records, "repeat": s.repeat, "max_per_trigger": s.max_per_trigger}

    def topic(self, name: str) -> str:
        """A fresh topic of this run (2 partitions)."""
        self.topics[name] = f"{self.tag}_{name.replace('-', '_')}"  # its table's name: an identifier
        create_topics(self.topics[name], partitions=2)
        return self.topics[name]


def run(spec: RunSpec, out: Path) -> dict[str, Any]:
    """Every part of `spec`, one after the other; returns the report (also written into `out`)."""
    out.mkdir(parents=True, exist_ok=True)
    log = out / "bench.log"
    log.write_text("")
    started, started_at, machine = time.perf_counter(), rep.now(), rep.machine()
    s = Bench(spec, log)
    sizes = load_topics(s)
    # The parts run in PARTS's order.
    throughput = catch_up(s)
    fresh, tiny, peak = freshness(s), small(s), memory(s)
    points = sweep(s, out, throughput.get("noop", {}).get("median"))
    report: dict[str, Any] = {
        "started": started_at,
        "command": shlex.join(["python", "-m", "dev.bench", *sys.argv[1:]]),
        "machine": machine,
        "records": spec.records,
        "repeat": spec.repeat,
        "max_per_trigger": spec.max_per_trigger,
        "value_bytes": sizes,
        "cores": machine["cores"],
        "spec": dataclasses.asdict(spec),
        "throughput": throughput,
        "ratios": rep.ratios(throughput),
        "freshness": fresh,
        "small": tiny,
        "memory": peak,
        "sweep": points,
        "targets": dataclasses.asdict(TARGETS),
        "date": rep.now(),
        "seconds": time.perf_counter() - started,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(rep.markdown(report))
    delete_topics(list(s.topics.values()))
    return report


def load_topics(s: Bench) -> dict[str, float]:
    """The catch-up topics with N records each, and their warm-up topics; the mean value sizes."""
    n = s.spec.records
    sizes: dict[str, float] = {"avro": 0.0, "json": 0.0}
    for v in s.spec.variants():
        t0 = time.perf_counter()
        sizes[v] = load(s.topic(v), v, n)
        load(s.topic(f"warm_{v}"), v, min(n, 50_000))
        took = time.perf_counter() - t0
        print(f"pre-loaded {n:,} {v} records into {s.topics[v]} ({sizes[v]:.0f} bytes, {took:.0f} s)")
    return sizes


def catch_up(s: Bench) -> dict[str, Any]:
    out = {}
    for part, (kind, variant) in CATCH_UP.items():
        if part not in s.spec.parts:
            continue
        w = WorkerSpec(kind=kind, variant=variant, topic=s.topics[variant], warm_topic=s.topics[f"warm_{variant}"],
                       tables=TABLES.get(part, {}), decode=DECODE.get(part, {}), routing=ROUTING.get(part, []),
                       **s.base())  # fmt: skip
        if part in COLD:  # a process per run, no warm-up
            w = dataclasses.replace(w, warm_topic="", repeat=1, cold=True)
            measured = merged([measure(f"{part} {i + 1}", w.to_json(), s.log) for i in range(s.spec.repeat)])
        else:
            measured = measure(part, w.to_json(), s.log)
        out[part] = rep.summarize_runs(part, measured, s.spec.records)
    return out


def merged(measured: list[dict[str, Any]]) -> dict[str, Any]:
    """Runs measured in processes of their own as one measurement: every result, the highest peaks."""
    peaks = ("peak_jvm_mb", "peak_workers_mb", "peak_mb")
    return {"results": [r for m in measured for r in m["results"]], **{k: max(m[k] for m in measured) for k in peaks}}


def freshness(s: Bench) -> list[dict[str, Any]]:
    """icesink's and Spark's sink's freshness runs, alternating, at each input rate."""
    out = []
    for rate in s.spec.rates:
        for part, kind, interval, variant in FRESHNESS_RUNS:
            if part not in s.spec.parts:
                continue
            topic = s.topic(f"fresh_{part.replace('-', '_')}_{interval}_{rate}")
            w = WorkerSpec(kind=kind, topic=topic, interval=interval, rate=rate, seconds=s.spec.seconds,
                           variant=variant, tables=TABLES.get(part, {}), **s.base())  # fmt: skip
            approach = "builtin" if kind == "builtin-freshness" else "icesink"
            approach += "-debezium" if variant == "debezium" else ""
            measured = measure(f"{part} {interval} s at {rate:,}/s", w.to_json(), s.log)
            f = rep.summarize_freshness(measured, interval, rate, approach)
            print(f"    {approach}, trigger {interval} s: p50 {f['p50']:.2f} s, p99 {f['p99']:.2f} s over "
                  f"{f['records']:,} records")  # fmt: skip
            out.append(f)
    return out


def tail(topic: str, records: int) -> str:
    """Kafka startingOffsets for the last `records` records of the topic (spread over its
    partitions, as the workload spreads them)."""
    ends = end_offsets(topic)
    share = records // len(ends)
    return json.dumps({topic: {str(tp.partition): max(0, end - share) for tp, end in ends.items()}})


def small(s: Bench) -> dict[str, Any] | None:
    if "small" not in s.spec.parts:
        return None
    records = min(SMALL_RECORDS, s.spec.records)
    avro = s.topics["avro"]
    # No warm-up topic: the median of ~20 batches leaves out the first, cold ones.
    w = WorkerSpec(kind="small", tag=s.tag, topic=avro, records=records, max_per_trigger=SMALL_TRIGGER,
                   starting_offsets=tail(avro, records))  # fmt: skip
    got = rep.summarize_small(measure("small", w.to_json(), s.log), records, SMALL_TRIGGER)
    print(f"    {got['batch_p50']:.2f} s per {SMALL_TRIGGER:,}-record batch, {got['empty_p50']:.3f} s per empty batch")
    return got


def memory(s: Bench) -> dict[str, Any] | None:
    """One icesink-avro run of --memory-records records in batches of MEMORY_TRIGGER: the tail of
    the Avro topic when it holds that many, else a topic of its own."""
    if "memory" not in s.spec.parts:
        return None
    records = s.spec.memory_records
    topic, starting = s.topics["avro"], None
    if records <= s.spec.records:
        starting = tail(topic, records)
    else:
        t0 = time.perf_counter()
        load(topic := s.topic("memory"), "avro", records)
        print(f"pre-loaded {records:,} avro records into {topic} ({time.perf_counter() - t0:.0f} s)")
    w = WorkerSpec(kind="icesink", variant="avro", tag=s.tag, topic=topic, warm_topic=s.topics["warm_avro"],
                   records=records, max_per_trigger=MEMORY_TRIGGER, starting_offsets=starting)  # fmt: skip
    return rep.summarize_memory(measure(f"memory {records:,}", w.to_json(), s.log), records, MEMORY_TRIGGER)


def sweep(s: Bench, out: Path, limit: float | None) -> list[dict[str, Any]]:
    if "sweep" not in s.spec.parts:
        return []
    records = min(s.spec.sweep_records, s.spec.records)
    avro = s.topics["avro"]
    starting = tail(avro, records)
    points = []
    for size in s.spec.sweep:
        w = WorkerSpec(kind="icesink", variant="avro", topic=avro, warm_topic=s.topics["warm_avro"], tag=s.tag,
                       records=records, max_per_trigger=size, starting_offsets=starting)  # fmt: skip
        point = rep.summarize_runs("sweep", measure(f"sweep {size:,}", w.to_json(), s.log), records)
        points.append({"max_per_trigger": size, "median": point["median"], "records": records})
    rep.plot_sweep(points, limit, out / "sweep.png")
    return points


def delete_topics(topics: list[str]) -> None:
    try:
        from confluent_kafka.admin import AdminClient

        AdminClient({"bootstrap.servers": KAFKA}).delete_topics(topics)
    except Exception as e:
        print(f"could not delete the benchmark topics: {e}")
