"""Measuring a worker process from outside: its process tree's peak memory (driver JVM, Python
workers), sampled every 0.2 s, and its results, which it prints as `BENCH {json}` lines. Inside the
worker: CPU seconds of the process tree, the data files a run wrote, and the batches and Spark jobs
of a streaming query that is not icesink's (icesink's batch handler reports its own)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dev.bench import REPO
from dev.kit.endpoints import CATALOG_URI, KAFKA, REGISTRY_URL, S3_ENDPOINT

MB = 2**20


def emit(**fields: Any) -> None:
    """A result line of a worker, read by `measure_once`."""
    print("BENCH " + json.dumps(fields, default=str), flush=True)


def tree_cpu() -> float:
    """CPU seconds of this process and its descendants (driver JVM, Python workers), counting the
    ones that ended through their parents."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def written(spark: Any, table: str) -> dict[str, int]:
    """Bytes and number of the table's live data files (not delete files)."""
    row = spark.sql(f"SELECT sum(file_size_in_bytes) AS b, count(*) AS n FROM {table}.files WHERE content = 0").first()
    return {"data_bytes": int(row.b or 0), "data_files": int(row.n)}


def query_batches(query: Any) -> list[dict[str, Any]]:
    """The micro-batches that read records, from the query's progress reports (records, seconds):
    the `batches` of a Spark sink, which has no step timings."""
    out = []
    for p in query.recentProgress:
        if p.numInputRows:
            out.append({"records": p.numInputRows, "total": p.durationMs.get("triggerExecution", 0) / 1000})
    return out


def trigger_phases(query: Any, skip: int = 0) -> dict[str, float]:
    """Median seconds of each phase of the query's triggers that ran a batch (Spark's progress
    `durationMs`: latestOffset, walCommit, addBatch, commitOffsets, ...), the first `skip` left out:
    where a trigger's time goes, whichever sink it runs. (Not by `numInputRows`: icesink's one-pass
    job reads Kafka itself, so Spark's source counts none.)"""
    phases: dict[str, list[float]] = {}
    for p in query.recentProgress[skip:]:
        if "addBatch" in p.durationMs:
            for k, v in p.durationMs.items():
                phases.setdefault(k, []).append(v / 1000)
    return {k: statistics.median(vs) for k, vs in phases.items()}


def query_jobs(spark: Any, query: Any) -> int | None:
    """The Spark jobs a streaming query ran: Spark runs a query's batches in a job group named by
    its run id (icesink's `SparkJobs` counts its batches' jobs the same way)."""
    ids = spark.sparkContext.statusTracker().getJobIdsForGroup(str(query.runId))
    return len(ids) or None


def sample_tree(pid: int) -> tuple[int, int, int]:
    """(driver JVM, Python workers, everything) resident bytes of the process tree under `pid`."""
    import psutil

    jvm = workers = total = 0
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0, 0, 0
    java_pids = set()
    for p in procs:
        try:
            rss = p.memory_info().rss
            name = p.name()
        except psutil.Error:
            continue
        total += rss
        if name == "java":
            jvm += rss
            java_pids.add(p.pid)
    for p in procs:
        try:
            if p.name().startswith("python") and any(a.pid in java_pids for a in p.parents()):
                workers += p.memory_info().rss
        except psutil.Error:
            continue
    return jvm, workers, total


@contextmanager
def peaks_of(pid: int) -> Iterator[list[int]]:
    """Peak (driver JVM, Python workers, everything) resident bytes while the block runs."""
    peaks = [0, 0, 0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for i, v in enumerate(sample_tree(pid)):
                peaks[i] = max(peaks[i], v)
            time.sleep(0.2)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        yield peaks
    finally:
        done.set()
        t.join()


def worker_command(*args: str) -> list[str]:
    """`python -m dev.bench ARGS` in the repo (the worker imports dev.* and icesink)."""
    return [sys.executable, "-m", "dev.bench", *args]


def wait_for_stack(timeout_s: float = 900) -> None:
    """Until Kafka, the catalog, S3 and the registry all accept connections (and a few seconds more)."""
    import socket

    endpoints = [KAFKA, *(urlparse(u).netloc for u in (CATALOG_URI, S3_ENDPOINT, REGISTRY_URL))]
    deadline = time.monotonic() + timeout_s
    waited = False
    while True:
        down = []
        for hostport in endpoints:
            host, _, port = hostport.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=2):
                    pass
            except OSError:
                down.append(hostport)
        if not down:
            if waited:
                time.sleep(10)  # let a restarted service finish starting
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"stack not reachable: {', '.join(down)}")
        if not waited:
            print(f"    waiting for {', '.join(down)}", flush=True)
        waited = True
        time.sleep(5)


def measure_once(name: str, spec_json: str, log: Path) -> dict[str, Any]:
    """Runs one worker process, sampling its memory; returns its emitted results and peaks."""
    print(f"[{time.strftime('%H:%M:%S')}] {name} ...", flush=True)
    # Spark's scratch (its copy of the jars, ~120 MB) in a folder of the run's, removed after it:
    # a worker that does not end cleanly leaves its own in /tmp otherwise, and they fill the disk.
    scratch = tempfile.mkdtemp(prefix="icesink-bench-spark-")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SPARK_LOCAL_DIRS": scratch}
    try:
        return _measured(name, spec_json, log, env)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _measured(name: str, spec_json: str, log: Path, env: dict[str, str]) -> dict[str, Any]:
    with open(log, "a") as err:
        err.write(f"\n===== {name} {spec_json}\n")
        err.flush()
        proc = subprocess.Popen(
            worker_command("worker", spec_json), stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=REPO
        )
        results = []
        with peaks_of(proc.pid) as peaks:
            for line in proc.stdout or []:
                if not line.startswith("BENCH "):
                    continue
                r = json.loads(line[6:])
                results.append(r)
                if r["kind"] == "run":
                    print(
                        f"    {r['seconds']:7.1f} s  {r['records'] / r['seconds']:>10,.0f} records/s  "
                        f"{r['records'] / r['cpu']:>9,.0f} records/CPU-s  "
                        f"({r['rows']:,} rows, {r.get('n_batches', len(r['batches']))} batches)",
                        flush=True,
                    )
            rc = proc.wait()
    if rc != 0 or not results:
        raise RuntimeError(f"{name} failed (exit {rc}); see {log}")
    return {
        "results": results,
        "peak_jvm_mb": peaks[0] / MB,
        "peak_workers_mb": peaks[1] / MB,
        "peak_mb": peaks[2] / MB,
    }


def measure(name: str, spec_json: str, log: Path, attempts: int = 3) -> dict[str, Any]:
    """`measure_once`, again (after a pause) when it fails: on a shared machine a service of the
    stack may be down for a moment (fault-injection tests stop and start them)."""
    for attempt in range(1, attempts + 1):
        wait_for_stack()
        try:
            return measure_once(name, spec_json, log)
        except RuntimeError as e:
            if attempt == attempts:
                raise SystemExit(str(e)) from None
            print(f"    {e}; again in 30 s", flush=True)
            time.sleep(30)
    raise AssertionError("unreachable")
