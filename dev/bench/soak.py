"""`python -m dev.bench.soak`: a changelog table under a steady stream of changes for a long while,
with the job's own table maintenance (`maintenance.tables: changes`, the default) and without
(`none`): how fast Trino reads it as time goes by, how fresh it is, and how the job's memory grows.

On the local stack with Trino (`dev/stack up --with-trino`): per side, `icesink run` in its own
process (a 1 s trigger, Avro changes keyed by `id` into a changelog table) and a producer process
writing `--rate` changes/s over `--keys` keys (a tenth of them deletes) for `--minutes`. Every
`--every` minutes Trino runs `count(*)` and a lookup by key (the median of 3 each), and the table's
live delete files are read (its snapshot summary; the table is unpartitioned, so that is its one
partition); the job's process tree (driver, JVM, Python workers) is sampled every 10 s. At the end
the job is stopped (SIGTERM), the delete files that dangle are counted (Trino's `$entries`), and,
on the maintained side, `icesink maintain` compacts the table fully for the reference reads: read
idle then, and again at each read of the side after it, under that job's load. Freshness: the producer keeps
the Kafka timestamp of every 50th record; its latency is the commit time of the first snapshot
whose offsets cover it (the first minute left out as warm-up).

    python -m dev.bench.soak [--minutes 30] [--rate 5000] [--keys 20000] [--every 5]
                             [--sides maintained,unmaintained] [--report docs/bench-report.json]

--report adds the figures to a report.json (section `soak`), from which docs/performance.md
renders them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from dev.bench import REPO
from dev.bench import report as rep
from dev.bench.measure import sample_tree
from dev.kit.endpoints import CATALOG_URI, KAFKA, REGISTRY_URL, S3_ENDPOINT
from dev.kit.kafka import create_topics, end_offsets

SAMPLE_EVERY = 50  # the producer keeps the timestamp of every 50th record
WARM_UP_S = 60
Sample = tuple[float, int, int, int]  # (seconds, driver JVM, Python workers, everything) bytes
SIDES = {"maintained": "changes", "unmaintained": "none"}


# ---------------------------------------------------------------- the producer (its own process)


def produce(topic: str, rate: int, seconds: int, keys: int, samples: Path) -> None:
    """`rate` changes/s for `seconds` over `keys` keys (a tenth deletes), in 10 ms slices; writes
    (partition, offset, Kafka timestamp ms) of every SAMPLE_EVERY-th record to `samples`."""
    from dev.bench.workloads import CDC_SCHEMA, AvroWriter, event, producer, send

    p = producer(linger_ms=5)
    writer = AvroWriter(topic, CDC_SCHEMA)
    rng = random.Random(38)
    kept: list[tuple[int, int, int]] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            kept.append((msg.partition(), msg.offset(), msg.timestamp()[1]))

    slices, started, i = 100, time.monotonic(), 0
    for s in range(seconds * slices):
        for _ in range((s + 1) * rate // slices - s * rate // slices):
            key = rng.randrange(keys)
            op = "D" if rng.random() < 0.1 else "U"
            value = writer({**event(i, key), "op": op})
            if i % SAMPLE_EVERY:
                send(p, topic, value, str(key).encode(), key % 2)
            else:
                while True:
                    try:
                        p.produce(topic, value=value, key=str(key).encode(), partition=key % 2, on_delivery=delivered)
                        break
                    except BufferError:
                        p.poll(0.2)
            i += 1
        p.poll(0)
        wait = started + (s + 1) / slices - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    assert p.flush(120) == 0, "changes not delivered"
    samples.write_text(json.dumps(kept))


# ---------------------------------------------------------------- reads


def trino_seconds(sql: str, runs: int = 3) -> float:
    """The median wall time of `sql` through the stack's Trino."""
    import trino

    url = os.environ.get("ICESINK_TRINO_URL", "http://127.0.0.1:8088")
    times = []
    with trino.dbapi.Connection(host=url, user="icesink", catalog="iceberg", request_timeout=120) as conn:
        for _ in range(runs):
            cursor = conn.cursor()
            started = time.monotonic()
            cursor.execute(sql)
            cursor.fetchall()
            times.append(time.monotonic() - started)
            cursor.close()
    return statistics.median(times)


def table_reads(name: str, key: int, runs: int = 3) -> dict[str, float]:
    """Trino's `count(*)` of the table and a lookup of one key: median seconds of `runs` each."""
    return {"count_s": trino_seconds(f"SELECT count(*) FROM iceberg.{name}", runs),
            "lookup_s": trino_seconds(f"SELECT * FROM iceberg.{name} WHERE id = {key}", runs)}  # fmt: skip


def trino_value(sql: str) -> Any:
    import trino

    url = os.environ.get("ICESINK_TRINO_URL", "http://127.0.0.1:8088")
    with trino.dbapi.Connection(host=url, user="icesink", catalog="iceberg", request_timeout=120) as conn:
        cursor = conn.cursor()
        cursor.execute(sql)
        return cursor.fetchall()[0][0]


def delete_files(table: Any) -> tuple[int, int]:
    """(live delete files, live data files) of the table's current snapshot, from its summary."""
    table.refresh()
    snapshot = table.current_snapshot()
    summary = snapshot.summary.additional_properties if snapshot is not None else {}
    return int(summary.get("total-delete-files", 0)), int(summary.get("total-data-files", 0))


def dangling(name: str) -> int:
    """Live equality-delete files of an unpartitioned table that no live row is old enough for."""
    entries = f'iceberg.{name.split(".")[0]}."{name.split(".")[1]}$entries"'
    return int(trino_value(
        f"SELECT count_if(data_file.content = 2 AND sequence_number <= (SELECT min(sequence_number) FROM {entries} "
        f"WHERE status < 2 AND data_file.content = 0)) FROM {entries} WHERE status < 2"
    ))  # fmt: skip


def latencies(table: Any, samples: list[tuple[int, int, int]]) -> list[float]:
    """Each sampled record's seconds from its Kafka timestamp to the first snapshot holding it."""
    from icesink.iceberg import snapshot_offsets as codec

    covered: list[tuple[int, dict[int, int]]] = []
    for s in sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms):
        got = codec.from_summary(s.summary.additional_properties)
        if got is not None:
            covered.append((s.timestamp_ms, {tp.partition: off for tp, off in got.items()}))
    out = []
    first = min((ts for _, _, ts in samples), default=0)
    for partition, offset, ts in samples:
        if ts < first + WARM_UP_S * 1000:
            continue
        at = next((when for when, offs in covered if offs.get(partition, 0) > offset), None)
        if at is not None:
            out.append((at - ts) / 1000)
    return out


# ---------------------------------------------------------------- one side


def config_file(work: Path, tag: str, side: str, topic: str) -> Path:
    raw = {
        "job": {"name": f"soak-{side}", "checkpoint_location": str(work / f"cp-{side}"),
                "trigger": {"mode": "processing-time", "interval": "1 second"}},
        "kafka": {"bootstrap_servers": KAFKA, "subscribe_pattern": f"^{topic}$"},
        "catalog": {"name": "icesink", "uri": CATALOG_URI},
        "s3": {"endpoint": S3_ENDPOINT},
        "tables": {"namespace": f"soak_{tag}", "mode": "changelog", "key_columns": ["id"]},
        "decode": {"format": "avro", "registry": {"url": REGISTRY_URL}, "operation_column": "op"},
        "maintenance": {"tables": SIDES[side]},
        "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": "false"}},
    }  # fmt: skip
    path = work / f"{side}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def run_side(work: Path, tag: str, side: str, args: argparse.Namespace, reference: str | None = None) -> dict[str, Any]:
    """One side's run. `reference`: a fully compacted table (the side before, compacted) that is
    read too at each read, under this side's load, as the reads of this side are."""
    from icesink.config import load_config
    from icesink.iceberg import pyiceberg

    topic = f"soak_{tag}_{side}"
    create_topics(topic, partitions=2)
    config_path = config_file(work, tag, side, topic)
    name = f"soak_{tag}.{topic}"
    log = work / f"{side}.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    job = subprocess.Popen([sys.executable, "-m", "icesink", "run", "--config", str(config_path)], cwd=REPO, env=env,
                           stdout=log.open("w"), stderr=subprocess.STDOUT)  # fmt: skip
    samples = work / f"{side}-samples.json"
    seconds = int(args.minutes * 60)
    producer = subprocess.Popen([sys.executable, "-m", "dev.bench.soak", "produce", "--topic", topic, "--rate",
                                 str(args.rate), "--seconds", str(seconds), "--keys", str(args.keys),
                                 "--samples", str(samples)], cwd=REPO)  # fmt: skip
    catalog = pyiceberg.catalog_for(load_config(config_path))
    started = time.monotonic()
    reads: list[dict[str, Any]] = []
    rss: list[Sample] = []
    max_deletes, next_read, table = 0, args.every * 60.0, None
    print(f"{side}: {args.rate:,} changes/s over {args.keys:,} keys for {args.minutes} min into {name}", flush=True)
    while producer.poll() is None:
        assert job.poll() is None, f"the job exited ({job.returncode}):\n{log.read_text()[-3000:]}"
        elapsed = time.monotonic() - started
        rss.append((elapsed, *sample_tree(job.pid)))
        try:
            table = table or catalog.load_table(name)
            deletes, data = delete_files(table)
            max_deletes = max(max_deletes, deletes)
        except Exception:  # not created before the first batch
            deletes = data = -1
        if elapsed >= next_read and table is not None:
            row: dict[str, Any] = {"minute": round(elapsed / 60, 1), **table_reads(name, args.keys // 3),
                                   "delete_files": deletes, "data_files": data}  # fmt: skip
            if reference is not None:
                row["reference"] = table_reads(reference, args.keys // 3)
            reads.append(row)
            print(f"  {side} minute {row['minute']}: count(*) {row['count_s']:.2f} s, "
                  f"lookup {row['lookup_s']:.2f} s, {deletes} delete files, {data} data files, "
                  f"RSS {_parts(rss[-1])}", flush=True)  # fmt: skip
            next_read += args.every * 60
        time.sleep(10)
    assert producer.returncode == 0, "the producer failed"
    from icesink.iceberg import snapshot_offsets as codec

    assert table is not None, f"{side}: the table was never created"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        table.refresh()
        held = [s for s in table.metadata.snapshots if codec.OFFSETS_KEY in s.summary.additional_properties]
        newest = max(held, key=lambda s: s.timestamp_ms) if held else None
        if newest is not None and codec.from_summary(newest.summary.additional_properties) == end_offsets(topic):
            break
        time.sleep(2)
    else:
        raise SystemExit(f"{side}: the job did not catch up within 180 s of the input's end")
    job.send_signal(signal.SIGTERM)
    job.wait(300)
    text = log.read_text()
    deletes, data = delete_files(table)
    final = {"minute": round((time.monotonic() - started) / 60, 1), **table_reads(name, args.keys // 3),
             "delete_files": deletes, "data_files": data}  # fmt: skip
    left_dangling = dangling(name)
    lat = sorted(latencies(table, json.loads(samples.read_text())))
    # The reference: the table fully compacted. The unmaintained side's is not made: its
    # compaction applies each of its ~1,800 delete files to every data file (25 minutes, then
    # its driver JVM died, in the run of 11-30), and the targets compare the maintained side's
    # reads with its own table compacted.
    compacted: dict[str, Any] = {"skipped": "the unmaintained side: the reference is the maintained side's"}
    if SIDES[side] != "none":
        command = [sys.executable, "-m", "icesink", "maintain", "-c", str(config_path), "--table", topic, "--json"]
        maintain = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1800)
        if maintain.returncode == 0:
            deletes, data = delete_files(table)
            compacted = {**table_reads(name, args.keys // 3, 5), "delete_files": deletes, "data_files": data}
        else:
            compacted = {"error": maintain.stderr.strip().splitlines()[-1][:300] if maintain.stderr else "?"}
    result = {
        "side": side, "table": name, "maintenance_tables": SIDES[side],
        "freshness_p50_s": round(lat[len(lat) // 2], 2) if lat else None,
        "freshness_p99_s": round(lat[int(len(lat) * 0.99)], 2) if lat else None,
        "reads": [*reads, {**final, "end": True}], "compacted": compacted,
        "max_live_delete_files": max_deletes, "dangling_at_end": left_dangling,
        "maintenance_runs": text.count(" done in "), "maintenance_failures": text.count("failed (the job goes on"),
        "batches": text.count(" timings: "),
        "rss_mb": {"minute_2": _rss_at(rss, 120), "minute_10": _rss_at(rss, 600), "minute_20": _rss_at(rss, 1200),
                   "end": _rss_at(rss, rss[-1][0]), "peak": round(max(r[3] for r in rss) / 2**20),
                   "growth_after_10_pct": _growth(rss, 600), "growth_after_20_pct": _growth(rss, 1200)},
        "rss_parts_mb": {"minute_2": _parts_at(rss, 120), "minute_10": _parts_at(rss, 600),
                         "minute_20": _parts_at(rss, 1200), "end": _parts_at(rss, rss[-1][0])},
    }  # fmt: skip
    print(f"{side}: freshness p50 {result['freshness_p50_s']} s, p99 {result['freshness_p99_s']} s; compacted "
          f"{compacted}; max {max_deletes} live "
          f"delete files, {left_dangling} dangling at the end; {result['maintenance_runs']} maintenance runs; "
          f"RSS {result['rss_mb']}", flush=True)  # fmt: skip
    return result


def _sample_at(rss: list[Sample], second: float) -> Sample | None:
    """The first sample from `second` on."""
    return next((r for r in rss if r[0] >= second), None)


def _rss_at(rss: list[Sample], second: float) -> int | None:
    """The process tree's RSS (MB) at the first sample from `second` on."""
    sample = _sample_at(rss, second)
    return round(sample[3] / 2**20) if sample else None


def _growth(rss: list[Sample], second: float) -> float | None:
    """The process tree's growth (%) from the first sample at `second` on to the largest of the last
    minute's samples; None for a run shorter than that."""
    sample = _sample_at(rss, second)
    if sample is None or sample is rss[-1]:
        return None
    at, last = sample[3], max(r[3] for r in rss[-6:])
    return round(100 * (last - at) / at, 1)


def _parts_at(rss: list[Sample], second: float) -> dict[str, int] | None:
    """The driver JVM's, the Python workers' and the rest's RSS (MB) at the first sample from `second` on."""
    sample = _sample_at(rss, second)
    if sample is None:
        return None
    _, jvm, workers, total = sample
    rest = total - jvm - workers
    return {"jvm": round(jvm / 2**20), "workers": round(workers / 2**20), "rest": round(rest / 2**20)}


def _parts(sample: Sample) -> str:
    _, jvm, workers, total = sample
    return (f"{total / 2**20:,.0f} MB (JVM {jvm / 2**20:,.0f}, workers {workers / 2**20:,.0f}, "
            f"rest {(total - jvm - workers) / 2**20:,.0f})")  # fmt: skip


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "produce":
        p = argparse.ArgumentParser(prog="python -m dev.bench.soak produce")
        for flag in ("--topic", "--samples"):
            p.add_argument(flag, required=True)
        for flag in ("--rate", "--seconds", "--keys"):
            p.add_argument(flag, type=int, required=True)
        a = p.parse_args(sys.argv[2:])
        produce(a.topic, a.rate, a.seconds, a.keys, Path(a.samples))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=int, default=5_000, help="changes per second")
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--every", type=float, default=5, help="minutes between Trino reads")
    parser.add_argument("--sides", default="maintained,unmaintained")
    parser.add_argument("--report", type=Path, help="add the figures to this report.json (section `soak`)")
    args = parser.parse_args()
    tag = uuid.uuid4().hex[:6]
    work = Path(tempfile.mkdtemp(prefix="icesink-soak-"))
    began = time.monotonic()
    start_text = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    # The reads of a fully compacted table are taken at each read of the next side too, under the
    # same load as the reads they are compared with: those taken after a side, with the machine
    # idle, flatter the compacted table (2-3x faster than under a job at 5,000 changes/s).
    sides: list[dict[str, Any]] = []
    for side in (s for s in args.sides.split(",") if s):
        before = sides[-1] if sides else None
        reference = before["table"] if before is not None and "count_s" in before["compacted"] else None
        sides.append(run_side(work, tag, side, args, reference))
    section = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "started": start_text,
        "minutes": round((time.monotonic() - began) / 60, 1), "machine": rep.machine(),
        "command": "python -m dev.bench.soak " + " ".join(sys.argv[1:]),
        "run_minutes": args.minutes, "rate": args.rate, "keys": args.keys, "sides": sides,
    }  # fmt: skip
    print(json.dumps(section, indent=1))
    if args.report:
        rep.merge_section(args.report, "soak", section)
    print(f"(took {section['minutes']:.0f} min; work folder {work})")


if __name__ == "__main__":
    main()
