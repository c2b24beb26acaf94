"""What the batch benchmarks that compare the one-pass job with Spark's path on the same records
share (debezium_batches.py, evolution_batches.py): a job's settings on the local stack, and each
side's batches run in one Spark session and summed up (medians of the batches after the first two:
the first creates the table, the second warms the session's caches)."""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from dev.kit.endpoints import CATALOG_URI, KAFKA, S3_ENDPOINT

SIDES = ("one-pass", "spark")


def side_config(
    tmp: Path, topic: str, tag: str, side: str, per_batch: int, tables: dict[str, Any], decode: dict[str, Any]
) -> Any:  # fmt: skip
    """The job of one side (`decode` says how it decodes: its direct_* switch is the side's)."""
    from icesink.config import parse_config

    raw = {
        "job": {"name": f"bench-{side}", "checkpoint_location": str(tmp / side), "trigger": {"mode": "available-now"}},
        "kafka": {"bootstrap_servers": KAFKA, "subscribe_pattern": f"^{topic}$", "max_offsets_per_trigger": per_batch},
        "catalog": {"name": "icesink", "uri": CATALOG_URI},
        "s3": {"endpoint": S3_ENDPOINT},
        "tables": {"namespace": f"{tag}_{side.replace('-', '_')}", **tables},
        "decode": decode,
        "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": "false", "spark.driver.memory": "3g"}},
    }  # fmt: skip
    return parse_config(raw, environ={})


def run_sides(sides: list[str], config: Any, per_batch: int) -> None:
    """Runs each side's job (`config(tmp, side)`) over the same topic in one Spark session and
    prints its batches' medians."""
    from icesink.job.query import Job
    from icesink.job.session import build_session
    from icesink.runtime.timings import BatchTimings

    tmp = Path(tempfile.mkdtemp(prefix="icesink-bench-"))
    spark = build_session(config(tmp, sides[0]))
    spark.sparkContext.setLogLevel("ERROR")
    for side in sides:
        seen: list[BatchTimings] = []
        job = Job(spark, config(tmp, side))
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
        jobs = statistics.median(t.spark_jobs or 0 for t in later)
        print(
            f"  {side:8} {len(seen)} batches ({one_pass} one-pass alone): a batch {batch:.2f} s, "
            f"{per_batch / batch:,.0f} records/s ({shown}; {jobs:.0f} Spark jobs); "
            f"the first two {seen[0].total:.1f}, {seen[1].total:.1f} s"
        )
