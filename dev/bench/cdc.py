"""CDC benchmark: the same keyed change stream written append-only and as upserts/deletes, in one run.

  python -m dev.bench cdc [--records 300000] [--keys 30000] [--batches 5] [--repeat 3] [--skip-reads]
                          [--modes append,changelog] [--json FILE] [--report REPORT.json]

Needs the local stack. A random change stream (JSON values with an I/U/D operation field, ~70%
updates of live keys, skewed keys, 2 partitions) is produced once; then icesink runs it, each run
in a fresh table and checkpoint, alternately as
  append     tables.mode append: every change is a new row (one append snapshot per batch)
  changelog  tables.mode changelog: last change per key, equality deletes + rows (one RowDelta per batch)
and prints records/s per run, the medians and the ratio (target: changelog >= 50% of append).
`--modes ordered-batch,ordered-table` measures instead what ordering changes across batches costs:
both are changelog tables with `tables.order_by: v` (the change's sequence number), the first
with `order_by_scope: batch`, the second with `table` (each batch joined with the table's key and
order columns); it prints the extra seconds per batch.
Then it writes the stream into a CDC table in small batches and prints how long a full-table read
through Spark takes after 10, 50 and 100 batches, with the data and delete file counts, so users
see when compaction pays. --report adds the figures to a report.json as its `cdc` section.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from dev.bench import CATALOG
from dev.bench import report as rep
from dev.kit.changes import Change, random_changes
from dev.kit.endpoints import CATALOG_URI, KAFKA, S3_ENDPOINT
from dev.kit.kafka import create_topics, produce_keyed

KEYED = {"mode": "changelog", "key_columns": ["id"]}
MODES: dict[str, dict[str, Any]] = {
    "append": {"mode": "append"},
    "changelog": KEYED,
    "ordered-batch": {**KEYED, "order_by": "v", "order_by_scope": "batch"},
    "ordered-table": {**KEYED, "order_by": "v", "order_by_scope": "table"},
}


def config(tmp: Path, topic: str, namespace: str, mode: str, max_per_trigger: int) -> Any:
    from icesink.config import parse_config

    return parse_config(
        {
            "job": {
                "name": f"bench-{mode}",
                "checkpoint_location": str(tmp / f"cp-{namespace}"),
                "trigger": {"mode": "available-now"},
            },
            "kafka": {
                "bootstrap_servers": KAFKA,
                "subscribe_pattern": f"^{topic}$",
                "max_offsets_per_trigger": max_per_trigger,
            },
            "catalog": {"name": CATALOG, "uri": CATALOG_URI},
            "s3": {"endpoint": S3_ENDPOINT},
            "tables": {"namespace": namespace, **MODES[mode]},
            "decode": {"operation_column": "op"},
            "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": "false"}},
        },
        environ={},
    )


def produce(topic: str, changes: list[Change]) -> None:
    produce_keyed(topic, [(c.kafka_key(), c.kafka_value(), c.partition) for c in changes])


def timed_run(spark: Any, cfg: Any) -> float:
    from icesink.job.query import Job

    started = time.perf_counter()
    Job(spark, cfg).run()
    return time.perf_counter() - started


def throughput(spark: Any, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    topic = f"bench_cdc_{uuid.uuid4().hex[:8]}"
    create_topics(topic, partitions=2)
    changes = list(random_changes(args.records, args.keys, 2, seed=1, tombstones=False))
    produce(topic, changes)
    per_trigger = -(-args.records // args.batches)
    first, second = args.modes
    runs: dict[str, list[float]] = {first: [], second: []}
    # A warm-up run pays the JVM's and the Python workers' start-up outside the figures.
    timed_run(spark, config(tmp, topic, f"bench_warm_{uuid.uuid4().hex[:6]}", "append", per_trigger))
    for i in range(args.repeat):
        for mode in (first, second) if i % 2 == 0 else (second, first):
            ns = f"bench_{mode.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
            seconds = timed_run(spark, config(tmp, topic, ns, mode, per_trigger))
            rate = args.records / seconds
            runs[mode].append(rate)
            rows = spark.sql(f"SELECT count(*) FROM {CATALOG}.{ns}.{topic}").first()[0]
            print(f"  {mode:13s} run {i + 1}: {seconds:6.1f} s  {rate:10,.0f} records/s  ({rows:,} rows)", flush=True)
    medians = {mode: statistics.median(r) for mode, r in runs.items()}
    # Extra seconds per batch of the second mode over the first, from the median rates.
    extra = (args.records / medians[second] - args.records / medians[first]) / args.batches
    return {"runs": runs, "median": medians, "ratio": medians[second] / medians[first], "extra_s_per_batch": extra}


def read_times(spark: Any, tmp: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    topic = f"bench_reads_{uuid.uuid4().hex[:8]}"
    create_topics(topic, partitions=2)
    per_batch = args.read_batch
    changes = list(random_changes(100 * per_batch, args.keys, 2, seed=2, tombstones=False))
    ns = f"bench_reads_{uuid.uuid4().hex[:6]}"
    table = f"{CATALOG}.{ns}.{topic}"
    out = []
    done = 0
    for batches in (10, 50, 100):
        produce(topic, changes[done * per_batch : batches * per_batch])
        done = batches
        timed_run(spark, config(tmp, topic, ns, "changelog", per_batch))
        reads = []
        for _ in range(3):
            started = time.perf_counter()
            spark.sql(f"SELECT count(*), sum(v) FROM {table}").collect()
            reads.append(time.perf_counter() - started)
        files = spark.sql(f"SELECT content, count(*) AS n FROM {table}.files GROUP BY content").collect()
        counts = {r.content: r.n for r in files}
        snaps = spark.sql(f"SELECT count(*) FROM {table}.snapshots").first()[0]
        row = {
            "batches": snaps,
            "read_s_median": statistics.median(reads),
            "data_files": counts.get(0, 0),
            "equality_delete_files": counts.get(2, 0),
        }
        out.append(row)
        print(
            f"  after {snaps:3d} batches: full read {row['read_s_median']:.2f} s (median of 3), "
            f"{row['data_files']} data files, {row['equality_delete_files']} equality-delete files",
            flush=True,
        )
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--keys", type=int, default=30_000)
    parser.add_argument("--batches", type=int, default=5, help="micro-batches per throughput run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--read-batch", type=int, default=1_000, help="records per batch of the read test")
    parser.add_argument("--skip-reads", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--report", type=Path, help="add the figures to this report.json (section `cdc`)")
    parser.add_argument("--modes", default="append,changelog", help=f"the two modes to compare, of {', '.join(MODES)}")


def main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    from icesink.job.session import build_session

    args.modes = args.modes.split(",")
    if len(args.modes) != 2 or not set(args.modes) <= set(MODES):
        parser.error(f"--modes: two of {', '.join(MODES)}")
    machine = rep.machine()
    with tempfile.TemporaryDirectory(prefix="bench-cdc-") as tmp:
        spark = build_session(config(Path(tmp), "x", "bench", "append", 1))
        print(f"throughput: {args.records:,} changes over {args.keys:,} keys in {args.batches} batches", flush=True)
        result: dict[str, Any] = {"throughput": throughput(spark, Path(tmp), args)}
        t = result["throughput"]
        first, second = args.modes
        target = " (target >= 0.50)" if args.modes == ["append", "changelog"] else ""
        print(
            f"median: {first} {t['median'][first]:,.0f} records/s, {second} {t['median'][second]:,.0f} "
            f"records/s; {second}/{first} = {t['ratio']:.2f}{target}; {second} costs "
            f"{t['extra_s_per_batch']:+.2f} s per batch of {-(-args.records // args.batches):,}",
            flush=True,
        )
        if not args.skip_reads:
            print(f"full-table reads of a CDC table written {args.read_batch:,} changes per batch:", flush=True)
            result["reads"] = read_times(spark, Path(tmp), args)
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        if args.report:
            settings = {k: getattr(args, k) for k in ("records", "keys", "batches", "repeat", "read_batch", "modes")}
            rep.merge_section(args.report, "cdc", {"date": rep.now(), "machine": machine, **settings, **result})
        spark.stop()
