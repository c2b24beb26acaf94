#!/usr/bin/env python3
"""Soak test (not a CI test): kill the job at random points for N minutes while a producer keeps
writing, then check the exactly-once oracle.

  eval "$(dev/stack env)"
  .venv/bin/python dev/soak.py [--minutes 10] [--rate 200] [--seed N]

Two topics (2 partitions each) get JSON records with unique ids at `--rate` records/s, with a
poison record now and then. The job (`icesink run`, processing-time trigger of 2 s, its own
process group) is started again and again; each run ends by one of:
  sigkill      SIGKILL of the whole process group after a random 5-40 s;
  after-commit / after-dead-letters / mid-write / executor-write
               the job's fault hook at a random batch (ICESINK_FAULT_INJECT);
  sigint       a clean stop after a random 5-40 s.
After the last run the producer stops, an available-now run drains the topics, and the tables
are compared with the oracle (dev/kit/oracle.py). It prints every injection and the
verdict, and exits 0 (exactly once) or 1.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dev.kit import oracle  # noqa: E402
from dev.kit.kafka import create_topics  # noqa: E402
from dev.kit.oracle import JSON_POISON, Ledger  # noqa: E402
from dev.kit.scenario import Scenario  # noqa: E402
from icesink.job.session import build_session  # noqa: E402
from icesink.runtime import faults  # noqa: E402

HOOKS = ("after-commit", "after-dead-letters", "mid-write", "executor-write")


def say(text: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {text}", flush=True)


def produce(ledger: Ledger, topics: list[str], rate: int, stop: threading.Event, rng: random.Random) -> None:
    chunk = max(1, rate // 5)
    while not stop.is_set():
        started = time.monotonic()
        ledger.good(rng.choice(topics), chunk)
        if rng.random() < 0.2:
            ledger.poison(rng.choice(topics), [rng.choice(JSON_POISON)])
        time.sleep(max(0.0, 0.2 - (time.monotonic() - started)))


def next_batch(checkpoint: Path) -> int:
    """The id Spark gives the next batch: batch ids go on across restarts of one checkpoint."""
    folder = checkpoint / "offsets"
    ids = [int(p.name) for p in folder.iterdir() if p.name.isdigit()] if folder.exists() else []
    return max(ids, default=-1) + 1


def one_run(config: Path, checkpoint: Path, log: Path, rng: random.Random, once: Path) -> str:
    """Starts the job, injects one fault, waits for it to end; returns what was injected."""
    kind = rng.choice(["sigkill", "sigkill", "sigint", *HOOKS])
    env = dict(os.environ)
    if kind in HOOKS:
        batch = next_batch(checkpoint) + rng.randint(0, 4)
        env[faults.ENV] = f"{kind}:{batch}"
        env[faults.ONCE_ENV] = str(once)
        once.unlink(missing_ok=True)
        kind = f"{kind} at batch {batch}"
    with log.open("a") as out:
        job = subprocess.Popen(
            [sys.executable, "-m", "icesink", "run", "--config", str(config)],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True,
        )  # fmt: skip
        after = rng.uniform(5, 40)
        try:
            job.wait(timeout=after + (60 if "batch" in kind else 0))
        except subprocess.TimeoutExpired:
            sig = signal.SIGINT if kind == "sigint" else signal.SIGKILL
            if "batch" in kind:
                kind += " (not reached; SIGKILL)"
            os.killpg(job.pid, sig)
            try:
                job.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
            kind += f" after {after:.0f}s"
    return f"{kind}; exit {job.returncode}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--rate", type=int, default=200, help="records per second")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="icesink-soak-"))
    scenario = Scenario.new(tmp)
    names = ["soak1", "soak2"]
    topics = [scenario.topic(f"{name}.20240101") for name in names]
    create_topics(*topics)
    config = scenario.write_config(
        tmp / "job.yaml",
        **{"job.trigger": {"mode": "processing-time", "interval": "2 seconds"}, "kafka.max_offsets_per_trigger": 2000},
    )
    log = tmp / "job.log"
    say(f"seed {seed}; topics {topics}; namespace {scenario.namespace}; job log {log}")

    ledger = Ledger()
    stop = threading.Event()
    producer = threading.Thread(target=produce, args=(ledger, topics, args.rate, stop, rng), daemon=True)
    producer.start()
    deadline = time.monotonic() + args.minutes * 60
    runs = 0
    while time.monotonic() < deadline:
        runs += 1
        say(f"run {runs}: {one_run(config, scenario.checkpoint, log, rng, tmp / f'once-{uuid.uuid4().hex}')}")
    stop.set()
    producer.join()
    say(f"producer stopped after {len(ledger.sent)} records; draining with an available-now run")
    drain = scenario.write_config(tmp / "drain.yaml", **{"kafka.max_offsets_per_trigger": 20000})
    with log.open("a") as out:
        done = subprocess.run(
            [sys.executable, "-m", "icesink", "run", "--config", str(drain)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    if done.returncode != 0:
        say(f"VERDICT: FAIL - the draining run exited {done.returncode}; see {log}")
        return 1

    spark = build_session(scenario.config())
    failures = []
    for topic in topics:
        table = scenario.table(topic.split(".")[0].removeprefix(f"{scenario.prefix}_"))
        try:
            oracle.check(
                spark, ledger, table, [topic], f"icesink.{scenario.namespace}.dead_letters", scenario.checkpoint
            )
            rows = spark.sql(f"SELECT count(*) FROM {table}").first()[0]  # type: ignore[index]
            say(f"{table}: {rows} rows, each produced record once, every poison record a dead letter")
        except AssertionError as e:
            failures.append(f"{table}: {e}")
    spark.stop()
    if failures:
        for f in failures:
            say(f"VERDICT: FAIL - {f}")
        return 1
    say(f"VERDICT: PASS - {runs} runs with faults, {len(ledger.sent)} records, exactly once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
