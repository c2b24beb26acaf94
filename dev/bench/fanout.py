"""`python -m dev.bench.fanout`: what a batch that routes to many tables costs against the same
records into one table, the Debezium capture of a whole database (one topic per source table).

On the local stack (`dev/stack up`), in one Spark session (local[2]) as `icesink run` builds it:
N topics (1 partition each) get R JSON records each per batch, into N tables; one topic (2
partitions) gets the same N * R records per batch, into one table. Each side first runs a batch
that creates its tables (not measured), then `--repeat` batches into the existing tables, each
with fresh records; the figure is the median batch time from the batch handler's timings (its
steps too). Printed: both medians, the ratio, and the step times of the median batch.

    python -m dev.bench.fanout [--tables 200 | --sizes 1,10,50,200,1000] [--records 50] [--repeat 3]
                               [--parallelism 1,8] [--commit both|together|apart] [--restart]
                               [--keep-tables-s 0]
                               [--report docs/bench-report.json]

--parallelism runs the many-table side once per `job.table_parallelism` value given; --commit once
with the batch's tables committed in one catalog request (`catalog.multi_table_commit: true`, the
default), once table by table (false), or both (the default); --restart then restarts each
many-table job with its checkpoint lost (a fresh one starts from the tables' offsets) and reports
its start. Each size reports the first batch (which creates the tables), the median batch and
its steps, the catalog requests, and the peak resident memory of the process tree (driver, its
JVM, the Python workers) while that side ran; --report adds them to a report.json (section
`fanout`), from which docs/performance.md renders them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from dev.bench import report as rep
from dev.bench.measure import peaks_of
from dev.kit.endpoints import CATALOG_URI, KAFKA, S3_ENDPOINT
from dev.kit.kafka import create_topics
from icesink.config import Config, parse_config
from icesink.runtime.timings import BatchTimings


def produce_round(topics: list[str], per_topic: int, start: int) -> None:
    producer = Producer({"bootstrap.servers": KAFKA, "linger.ms": 20})
    for topic in topics:
        for i in range(start, start + per_topic):
            value = {"id": i, "name": f"row-{i}", "amount": i * 0.5, "status": "open" if i % 3 else "closed"}
            while True:
                try:
                    producer.produce(topic, key=str(i).encode(), value=json.dumps(value).encode())
                    break
                except BufferError:
                    producer.poll(0.2)
    assert producer.flush(120) == 0, "records not delivered"


CATALOG_PROPERTIES: dict[str, str] = {}  # --catalog-property
KEEP_TABLES_S: list[float] = []  # --keep-tables-s (none: the job's default)


def config_for(tag: str, pattern: str, checkpoint: Path, parallelism: int | None, together: bool = True) -> Config:
    raw: dict[str, Any] = {
        "job": {"name": f"fanout-{tag}", "checkpoint_location": str(checkpoint), "trigger": {"mode": "available-now"}},
        "kafka": {"bootstrap_servers": KAFKA, "subscribe_pattern": pattern},
        "catalog": {
            "name": "icesink",
            "uri": CATALOG_URI,
            "properties": dict(CATALOG_PROPERTIES),
            "multi_table_commit": together,
            **({"keep_tables_s": KEEP_TABLES_S[0]} if KEEP_TABLES_S else {}),
        },
        "s3": {"endpoint": S3_ENDPOINT},
        "tables": {"namespace": f"bench_{tag}"},
        "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": "false"}},
    }
    if parallelism is not None:
        raw["job"]["table_parallelism"] = parallelism
    return parse_config(raw)


def batches(
    spark: Any, config: Config, topics: list[str], per_topic: int, repeat: int
) -> tuple[BatchTimings, list[BatchTimings]]:  # fmt: skip
    """A batch that creates the tables, then `repeat` measured batches; their timings."""
    from icesink.job.query import Job

    measured: list[BatchTimings] = []
    first: BatchTimings | None = None
    # One job for every round, as a running stream keeps its batch handler (its decoders' memos,
    # the writer schemas it saw, its driver threads) from batch to batch; each round is a query
    # of its own only so that it is exactly one batch.
    job = Job(spark, config)
    for round_ in range(repeat + 1):
        produce_round(topics, per_topic, round_ * per_topic)
        seen: list[BatchTimings] = []
        job.handler.on_timings = seen.append
        job.run()
        assert len(seen) == 1, f"expected one batch per round, got {len(seen)}"
        if round_:
            measured.append(seen[0])
        else:
            first = seen[0]
        print(f"  round {round_}: {seen[0].line()}", flush=True)
    assert first is not None
    return first, measured


def restarted(spark: Any, config: Config, topics: list[str], per_topic: int, start: int) -> str:
    """The many-table job restarted with its checkpoint lost: a fresh checkpoint starts from the
    tables' offsets (`kafka.starting_offsets: tables`), so its batch must read only the records
    produced since. Its start (from the job's creation to its batch) and its batch, in words."""
    from icesink.job.query import Job

    produce_round(topics, per_topic, start)
    began = time.monotonic()
    job = Job(spark, config)
    seen: list[BatchTimings] = []
    job.handler.on_timings = seen.append
    job.run()
    total = time.monotonic() - began
    records = sum(t.records for t in seen)
    batch = sum(t.total for t in seen)
    assert records == len(topics) * per_topic, f"the restart read {records} records, not only the new ones"
    return (
        f"restart with a lost checkpoint: {total:.2f} s in all, {total - batch:.2f} s to start from the "
        f"{len(topics)} tables' offsets, then {len(seen)} batch(es) of {records} record(s) in {batch:.2f} s"
    )


def median_batch(runs: list[BatchTimings]) -> BatchTimings:
    return sorted(runs, key=lambda t: t.total)[len(runs) // 2]


def _row(
    label: str, first: BatchTimings, batch: BatchTimings, single: BatchTimings, peaks: list[int]
) -> dict[str, Any]:
    return {
        "side": label, "first_s": round(first.total, 3), "median_s": round(batch.total, 3),
        "vs_one_table": round(batch.total / single.total, 2), "steps": {k: round(v, 3) for k, v in batch.steps.items()},
        "catalog_requests": batch.catalog_requests, "spark_jobs": batch.spark_jobs,
        "peak_rss_mb": {"jvm": peaks[0] // 2**20, "workers": peaks[1] // 2**20, "all": peaks[2] // 2**20},
    }  # fmt: skip


def run_size(
    spark: Any, args: Any, tag: str, work: Path, size: tuple[int, int], levels: list[int | None]
) -> dict[str, Any]:  # fmt: skip
    """One size (tables, records per table): the one-table batch of the same records, then the
    many-table side in each mode."""
    tables, records = size
    total = tables * records
    one = f"fanout_{tag}_one{tables}"
    create_topics(one, partitions=2)
    print(f"one table: {total} records per batch from 1 topic", flush=True)
    cp = work / f"cp-one{tables}"
    _, runs = batches(spark, config_for(tag, f"^{one}$", cp, None), [one], total, args.repeat)
    single = median_batch(runs)
    out: dict[str, Any] = {
        "tables": tables, "records_per_table": records, "records": total, "one_table_s": round(single.total, 3),
        "sides": [],
    }  # fmt: skip
    modes = {"both": (True, False), "together": (True,), "apart": (False,)}[args.commit]
    for level in levels:
        for together in modes:
            side = f"{tables}_{level or 0}_{'m' if together else 's'}"
            many = [f"fanout_{tag}_{side}_t{i:04d}" for i in range(tables)]
            create_topics(*many, partitions=1)
            pattern = f"^fanout_{tag}_{side}_t[0-9]+$"
            label = f"table_parallelism {level}" if level is not None else "default table_parallelism"
            label += ", one commit request" if together else ", a commit per table"
            print(f"{tables} tables, {records} records each per batch ({label})", flush=True)
            config = config_for(tag, pattern, work / f"cp-many-{side}", level, together)
            with peaks_of(os.getpid()) as peaks:
                first, runs = batches(spark, config, many, records, args.repeat)
            row = _row(label, first, median_batch(runs), single, peaks)
            if args.restart:
                fresh = config_for(tag, pattern, work / f"cp-lost-{side}", level, together)
                row["restart"] = restarted(spark, fresh, many, records, (args.repeat + 1) * records)
                print(f"  {row['restart']}", flush=True)
            out["sides"].append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument(
        "--sizes", default="",
        help="several sizes instead of --tables: TABLES[:RECORDS] comma-separated, e.g. 1,10,50,200,1000:10",
    )  # fmt: skip
    parser.add_argument("--records", type=int, default=50, help="records per topic per batch")
    parser.add_argument("--repeat", type=int, default=3, help="measured batches per side (median)")
    parser.add_argument("--parallelism", default="", help="job.table_parallelism values, comma-separated")
    parser.add_argument(
        "--restart", action="store_true",
        help="then restart the many-table job with a fresh checkpoint (a lost one): it starts from the tables",
    )  # fmt: skip
    parser.add_argument(
        "--commit", choices=("both", "together", "apart"), default="both",
        help="the many-table side with catalog.multi_table_commit true (together), false (apart), or each",
    )  # fmt: skip
    parser.add_argument(
        "--catalog-property", action="append", default=[], metavar="KEY=VALUE",
        help="a catalog.properties entry for both sides (repeatable), e.g. rest-metrics-reporting-enabled=false",
    )  # fmt: skip
    parser.add_argument(
        "--keep-tables-s", type=float,
        help="catalog.keep_tables_s for both sides (0: every table loaded every batch); default: the job's",
    )  # fmt: skip
    parser.add_argument("--report", type=Path, help="add the figures to this report.json (section `fanout`)")
    args = parser.parse_args()
    from icesink.job.session import build_session

    CATALOG_PROPERTIES.update(kv.split("=", 1) for kv in args.catalog_property)
    if args.keep_tables_s is not None:
        KEEP_TABLES_S.append(args.keep_tables_s)
    levels: list[int | None] = [int(x) for x in args.parallelism.split(",") if x] or [None]
    sizes = [
        (int(n), int(r[0]) if r else args.records) for n, *r in (x.split(":") for x in args.sizes.split(",") if x)
    ] or [(args.tables, args.records)]
    tag = uuid.uuid4().hex[:6]
    work = Path(tempfile.mkdtemp(prefix="icesink-fanout-"))
    spark = build_session(config_for(tag, "^none$", work / "cp-none", None))
    started, began = time.monotonic(), rep.now()
    results = [run_size(spark, args, tag, work, n, levels) for n in sizes]
    print()
    for r in results:
        print(
            f"{r['tables']} table(s) x {r['records_per_table']}: one table of {r['records']} records: median batch "
            f"{r['one_table_s']:.2f} s"
        )
        for side in r["sides"]:
            peak = side["peak_rss_mb"]["all"]
            print(
                f"  {side['side']}: first batch {side['first_s']:.2f} s, median batch {side['median_s']:.2f} s "
                f"({side['vs_one_table']:.1f}x), {side['catalog_requests']} catalog requests, peak RSS {peak} MB; "
                + ", ".join(f"{k} {v:.2f}s" for k, v in side["steps"].items())
            )
            if "restart" in side:
                print(f"  {side['restart']}")
    minutes = (time.monotonic() - started) / 60
    print(f"(took {minutes:.1f} min; namespace bench_{tag}; target: <= 3x at 200 tables)")
    if args.report:
        command = "python -m dev.bench.fanout " + " ".join(sys.argv[1:])
        section = {
            "date": rep.now(), "started": began, "minutes": round(minutes, 1), "machine": rep.machine(),
            "command": command.replace(f" --report {args.report}", ""), "repeat": args.repeat, "sizes": results,
        }  # fmt: skip
        rep.merge_section(args.report, "fanout", section)


if __name__ == "__main__":
    main()
