"""Batches of Debezium change events as JsonConverter writes them with its defaults (the seed's own
pipeline: the schema in every record, schema-wrapped keys, tombstones after deletes), into a
changelog table ordered by `_source_lsn` across batches (`key_format: json`, `bucket(16, id)`),
`--per-batch` changes a batch (issue 36: a batch of 1,000 changes at most 0.5 s end to end): each
batch's seconds and steps through the one-pass job and through Spark's path
(`decode.direct_json: false`), on the same records, in one Spark session. Medians of the batches
after the first two (the first creates the table; the second warms the session's caches).

  python -m dev.bench debezium-batches --changes 20000 --per-batch 1000

`--schemas off`: the same events as the converter writes them with `schemas.enable=false` (the
payloads alone, plain JSON keys), which the one-pass job takes too. `--resent N`: each batch starts
with the previous batch's last N changes sent again (as Debezium re-sends after a Kafka Connect
crash): older than the greatest `_source_lsn` the table holds, though not than their own keys'
rows, so the one-pass job's first round declines the table and its second round compares them
with the rows the table holds (batch/direct_held.py).
"""

from __future__ import annotations

import argparse
import json
import uuid
from pathlib import Path
from typing import Any

from dev.bench import workloads as wl
from dev.bench.side_batches import SIDES, run_sides, side_config
from dev.kit.kafka import create_topics


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--changes", type=int, default=20_000, help="changes produced (default 20,000)")
    parser.add_argument("--per-batch", type=int, default=1_000, help="changes a batch (default 1,000)")
    parser.add_argument(
        "--schemas", choices=("on", "off"), default="on", help="the JsonConverter's schemas.enable (default on)"
    )
    parser.add_argument(
        "--resent", type=int, default=0,
        help="the previous batch's last N changes sent again at the start of each batch (default 0)",
    )  # fmt: skip
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES), help="the jobs run (default both)")


def _unwrapped(record: bytes) -> bytes:
    """A Connect JSON record as the converter writes it with its schemas off: the payload alone."""
    return json.dumps(json.loads(record)["payload"], separators=(",", ":")).encode()


def _produce(topic: str, n: int, schemas: bool, per_batch: int, resent: int) -> None:
    """`n` changes; with `resent`, each batch after the first starts with the previous batch's
    last `resent` changes sent again (as Debezium re-sends after a Kafka Connect crash)."""
    create_topics(topic, partitions=1)
    p = wl.producer()
    ops = {"I": "c", "U": "u", "D": "d"}
    sent: list[tuple[bytes | None, bytes]] = []
    boundary = per_batch  # the offset the next batch starts at, or a record or two before it
    for i, (key, op) in enumerate(wl.cdc_changes(n, seed=7)):
        if resent and len(sent) >= boundary:
            for value, k in [e for e in sent[-per_batch:] if e[0] is not None][-resent:]:
                sent.append((value, k))
                wl.send(p, topic, value, k, 0)
            boundary += per_batch
        row = wl.debezium_json_row(i, key)
        before, after = (row, None) if op == "D" else (None, row)
        value = wl.dj.change(wl.DEBEZIUM_JSON_ENVELOPE, ops[op], before, after, 1_000 + i)
        k = wl.dj.wrapped(wl.DEBEZIUM_JSON_KEY, {"id": key})
        value, k = (value, k) if schemas else (_unwrapped(value), _unwrapped(k))
        for event in [(value, k)] + ([(None, k)] if op == "D" else []):
            sent.append(event)
            wl.send(p, topic, *event, 0)
    assert p.flush(120) == 0, f"records to {topic} not delivered"


def main(args: argparse.Namespace) -> None:
    tag = f"dbzb_{uuid.uuid4().hex[:6]}"
    topic = f"{tag}_events"
    _produce(topic, args.changes, args.schemas == "on", args.per_batch, args.resent)
    kind = "Connect JSON" if args.schemas == "on" else "JSON (schemas off)"
    again = f", each batch starting with the previous one's last {args.resent} sent again" if args.resent else ""
    print(f"{args.changes:,} Debezium {kind} changes, {args.per_batch:,} a batch{again}; medians of batches 3 on")
    tables = {"mode": "changelog", "order_by": "_source_lsn", "partition_by": ["bucket(16, id)"]}

    def config(tmp: Path, side: str) -> Any:
        decode = {
            "format": "json", "envelope": "debezium", "key_format": "json", "source_columns": ["ts_ms", "lsn"],
            "direct_json": side == "one-pass",
        }  # fmt: skip
        return side_config(tmp, topic, tag, side, args.per_batch, tables, decode)

    run_sides(args.sides, config, args.per_batch)
