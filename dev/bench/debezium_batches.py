"""Batches of Debezium change events as JsonConverter writes them with its defaults (the seed's own
pipeline: the schema in every record, schema-wrapped keys, tombstones after deletes), into a
changelog table ordered by `_source_lsn` across batches (`key_format: json`, `bucket(16, id)`),
`--per-batch` changes a batch (issue 36: a batch of 1,000 changes at most 0.5 s end to end): each
batch's seconds and steps through the one-pass job and through Spark's path
(`decode.direct_json: false`), on the same records, in one Spark session. Medians of the batches
after the first two (the first creates the table; the second warms the session's caches).

  python -m dev.bench debezium-batches --changes 20000 --per-batch 1000

`--schemas off`: the same events as the converter writes them with `schemas.enable=false` (the
payloads alone, plain JSON keys), which the one-pass job takes too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import uuid
from pathlib import Path
from typing import Any

from dev.bench import workloads as wl
from dev.kit.endpoints import CATALOG_URI, KAFKA, S3_ENDPOINT
from dev.kit.kafka import create_topics

SIDES = ("one-pass", "spark")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--changes", type=int, default=20_000, help="changes produced (default 20,000)")
    parser.add_argument("--per-batch", type=int, default=1_000, help="changes a batch (default 1,000)")
    parser.add_argument(
        "--schemas", choices=("on", "off"), default="on", help="the JsonConverter's schemas.enable (default on)"
    )
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES), help="the jobs run (default both)")


def _unwrapped(record: bytes) -> bytes:
    """A Connect JSON record as the converter writes it with its schemas off: the payload alone."""
    return json.dumps(json.loads(record)["payload"], separators=(",", ":")).encode()


def _produce(topic: str, n: int, schemas: bool) -> None:
    create_topics(topic, partitions=1)
    p = wl.producer()
    ops = {"I": "c", "U": "u", "D": "d"}
    for i, (key, op) in enumerate(wl.cdc_changes(n, seed=7)):
        row = wl.debezium_json_row(i, key)
        before, after = (row, None) if op == "D" else (None, row)
        value = wl.dj.change(wl.DEBEZIUM_JSON_ENVELOPE, ops[op], before, after, 1_000 + i)
        k = wl.dj.wrapped(wl.DEBEZIUM_JSON_KEY, {"id": key})
        value, k = (value, k) if schemas else (_unwrapped(value), _unwrapped(k))
        wl.send(p, topic, value, k, 0)
        if op == "D":
            wl.send(p, topic, None, k, 0)
    assert p.flush(120) == 0, f"records to {topic} not delivered"


def _config(tmp: Path, topic: str, tag: str, side: str, per_batch: int) -> Any:
    from icesink.config import parse_config

    raw = {
        "job": {"name": f"bench-{side}", "checkpoint_location": str(tmp / side), "trigger": {"mode": "available-now"}},
        "kafka": {"bootstrap_servers": KAFKA, "subscribe_pattern": f"^{topic}$", "max_offsets_per_trigger": per_batch},
        "catalog": {"name": "icesink", "uri": CATALOG_URI},
        "s3": {"endpoint": S3_ENDPOINT},
        "tables": {
            "namespace": f"{tag}_{side.replace('-', '_')}", "mode": "changelog", "order_by": "_source_lsn",
            "partition_by": ["bucket(16, id)"],
        },
        "decode": {
            "format": "json", "envelope": "debezium", "key_format": "json", "source_columns": ["ts_ms", "lsn"],
            "direct_json": side == "one-pass",
        },
        "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": "false", "spark.driver.memory": "3g"}},
    }  # fmt: skip
    return parse_config(raw, environ={})


def main(args: argparse.Namespace) -> None:
    from icesink.job.query import Job
    from icesink.job.session import build_session
    from icesink.runtime.timings import BatchTimings

    tag = f"dbzb_{uuid.uuid4().hex[:6]}"
    topic = f"{tag}_events"
    _produce(topic, args.changes, args.schemas == "on")
    tmp = Path(tempfile.mkdtemp(prefix="icesink-bench-"))
    spark = build_session(_config(tmp, topic, tag, args.sides[0], args.per_batch))
    spark.sparkContext.setLogLevel("ERROR")
    kind = "Connect JSON" if args.schemas == "on" else "JSON (schemas off)"
    print(f"{args.changes:,} Debezium {kind} changes, {args.per_batch:,} a batch; medians of batches 3 on")
    for side in args.sides:
        seen: list[BatchTimings] = []
        job = Job(spark, _config(tmp, topic, tag, side, args.per_batch))
        job.handler.on_timings = seen.append
        job.run()
        later = seen[2:] or seen
        steps: dict[str, list[float]] = {}
        for t in later:
            for k, v in t.steps.items():
                steps.setdefault(k, []).append(v)
        one_pass = sum("direct" in t.steps and "decode" not in t.steps for t in seen)
        shown = ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in steps.items() if statistics.median(v) >= 0.005)
        batch = statistics.median(t.total for t in later)
        print(
            f"  {side:8} {len(seen)} batches ({one_pass} one-pass): a batch {batch:.2f} s ({shown}); "
            f"the first two {seen[0].total:.1f}, {seen[1].total:.1f} s"
        )
