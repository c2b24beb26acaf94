"""Batches that each bring a producer's new Avro writer schema (one more optional field than the
last, the records of the version before still mixed in), as a running job meets them: the table
evolves every batch. Each batch's seconds and steps through the one-pass job (its second job with
the new schema, batch/direct_rounds.py) and through Spark's path (`decode.direct_avro: false`:
a second pass), on the same records, in one Spark session. Medians of the batches after the first
two (the first creates the table; the second warms the session's caches).

  python -m dev.bench evolution-batches --batches 12 --per-batch 10000 [--format json]

Each Avro version is registered under a subject of its own, not the topic's: the job plans a batch
with the schemas the topic carried last time, and the topic's latest version stays the first, as
when a producer registers a new version while the job runs. `--format json`: the same records as
plain JSON, each batch with one more field (`decode.direct_json` on and off).
"""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path
from typing import Any

from dev.bench import workloads as wl
from dev.bench.side_batches import SIDES, run_sides, side_config
from dev.kit.endpoints import REGISTRY_URL
from dev.kit.kafka import create_topics


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batches", type=int, default=12, help="batches, each with a new version (default 12)")
    parser.add_argument("--per-batch", type=int, default=10_000, help="records a batch (default 10,000)")
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES), help="the jobs run (default both)")
    parser.add_argument("--format", choices=("avro", "json"), default="avro", help="the records' format (default avro)")


def version(v: int) -> dict[str, Any]:
    """The bench's event schema with `v` more optional fields."""
    extra = [{"name": f"extra_{k}", "type": ["null", "long"], "default": None} for k in range(1, v + 1)]
    return {**wl.SCHEMA, "fields": [*wl.SCHEMA["fields"], *extra]}


def _produce(topic: str, tag: str, batches: int, per_batch: int, avro: bool) -> None:
    """Batch b: records of version b, every fourth one of version b - 1."""
    create_topics(topic, partitions=2)
    writers = [wl.AvroWriter(topic if v == 0 else f"{tag}_v{v}", version(v)) for v in range(batches)] if avro else []
    p = wl.producer()
    i = 0
    for b in range(batches):
        for n in range(per_batch):
            v = max(b - 1, 0) if n % 4 == 0 else b
            extra = {f"extra_{k}": i for k in range(1, v + 1)}
            value = writers[v]({**wl.event(i), **extra}) if avro else wl.as_json(wl.event(i))[:-1] + _json_tail(extra)
            wl.send(p, topic, value, None, i % 2)
            i += 1
    assert p.flush(120) == 0, f"records to {topic} not delivered"


def _json_tail(extra: dict[str, int]) -> bytes:
    """The extra fields and the closing brace of a JSON object."""
    return b"".join(f',"{k}":{v}'.encode() for k, v in extra.items()) + b"}"


def main(args: argparse.Namespace) -> None:
    tag = f"evob_{uuid.uuid4().hex[:6]}"
    topic = f"{tag}_events"
    avro = args.format == "avro"
    _produce(topic, tag, args.batches, args.per_batch, avro)
    kind = "Avro records, a new writer schema" if avro else "JSON records, a new field"
    print(f"{args.batches} batches of {args.per_batch:,} {kind} each; medians of batches 3 on")

    def config(tmp: Path, side: str) -> Any:
        decode = (
            {"format": "avro", "registry": {"url": REGISTRY_URL}, "direct_avro": side == "one-pass"}
            if avro else {"format": "json", "direct_json": side == "one-pass"}
        )  # fmt: skip
        return side_config(tmp, topic, tag, side, args.per_batch, {}, decode)

    run_sides(args.sides, config, args.per_batch)
