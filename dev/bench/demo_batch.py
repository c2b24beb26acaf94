"""`python -m dev.bench.demo_batch [--runs N] [--before SRC]`: the demo's first batch, as a user
meets it (issue 36's target: at most 2 s). The demo's sample events (scripts/demo_events.py: 5,000
nested JSON events in each of two daily topics, fresh ones of this run's own, so earlier runs'
records are not read) go through `icesink run --config conf/local.yaml`, `available-now`, into a
new namespace with a new checkpoint each run; what is timed is the job's own line for batch 0
(`batch 0 timings: ... in S s: ... direct ..., commit ...`), the first batch after the job's
start, with its workers' warm-up beside it as the README says.

`--before SRC` alternates the runs with the code under SRC (a `src` directory: `git archive
<commit> src | tar -x -C DIR`, then DIR/src), on PYTHONPATH, which the Python workers inherit.
Needs the stack up (`dev/stack up`; its endpoints in the environment: `eval "$(dev/stack env)"`).
Prints each run and the medians.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_TIMINGS = re.compile(r"batch 0 timings: (\d+) record\(s\) in ([\d.]+)s: (.*?); \d+ Spark job")
TARGET_S = 2.0


def _produce(prefix: str) -> None:
    bootstrap = os.environ.get("ICESINK_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
    topics = [f"{prefix}.20240102", f"{prefix}_20240103"]
    script = REPO / "scripts" / "demo_events.py"
    subprocess.run([sys.executable, str(script), "--bootstrap", bootstrap, *topics], check=True, cwd=REPO)


def _run(prefix: str, tag: str, src: str | None) -> tuple[int, float, str]:
    env = {
        **os.environ,
        "ICESINK__JOB__TRIGGER__MODE": "available-now",
        "ICESINK__KAFKA__SUBSCRIBE_PATTERN": f"^{prefix}[._-][0-9]{{8}}$",
        "ICESINK__KAFKA__STARTING_OFFSETS": "earliest",
        "ICESINK__TABLES__NAMESPACE": f"demo_bench_{tag}",
        "ICESINK__JOB__CHECKPOINT_LOCATION": f"/tmp/icesink-demo-bench/{tag}",
    }
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    icesink = str(Path(sys.executable).parent / "icesink")
    done = subprocess.run(
        [icesink, "run", "--config", "conf/local.yaml"], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    found = _TIMINGS.search(done.stderr + done.stdout)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"the run failed ({done.returncode}):\n{(done.stderr or done.stdout)[-3000:]}")
    return int(found.group(1)), float(found.group(2)), found.group(3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs of each code (default 3)")
    parser.add_argument("--before", help="a src directory of the previous code, alternated with this one")
    args = parser.parse_args()
    prefix = f"demobench{uuid.uuid4().hex[:8]}"
    _produce(prefix)
    sides = [("before", args.before), ("after", None)] if args.before else [("this code", None)]
    seconds: dict[str, list[float]] = {name: [] for name, _ in sides}
    for n in range(args.runs):
        for name, src in sides:
            records, total, steps = _run(prefix, f"{prefix}_{name.replace(' ', '_')}_{n}", src)
            seconds[name].append(total)
            print(f"{name:>9} run {n + 1}: {records:,} records, batch 0 in {total:.2f} s ({steps})", flush=True)
    for name, values in seconds.items():
        median = statistics.median(values)
        verdict = "met" if median <= TARGET_S else "missed"
        runs = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name}: median {median:.2f} s (runs {runs}); target {TARGET_S:.0f} s {verdict}")


if __name__ == "__main__":
    main()
