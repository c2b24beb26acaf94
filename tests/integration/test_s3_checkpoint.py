"""A checkpoint on object storage (`s3a://` on the stack's S3 server): the job runs and resumes on
it, and `icesink offsets reset` moves it aside there (a copy, then a delete) and leaves the starting
offsets next to it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from pyspark.sql import SparkSession

from dev.kit.endpoints import REPO
from dev.kit.kafka import create_topics, produce
from dev.kit.scenario import Scenario
from icesink.config import load_config
from icesink.iceberg import snapshot_offsets as codec
from icesink.job.query import Job
from icesink.model import TopicPartition
from icesink.ops import checkpoints
from tests.support.cli import run_cli
from tests.support.spark import snapshots

pytestmark = pytest.mark.slow


def objects(place: checkpoints.Place) -> list[str]:
    """The checkpoint's objects, relative to it."""
    if place.kind() != pafs.FileType.Directory:
        return []
    found = place.fs.get_file_info(pafs.FileSelector(place.path, recursive=True))
    return sorted(f.path[len(place.path) + 1 :] for f in found if f.is_file)


def test_a_checkpoint_on_s3_runs_resumes_and_is_reset_there(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("orders")
    create_topics(topic, partitions=2)
    produce(topic, [{"id": i} for i in range(100)])
    location = f"s3a://warehouse/checkpoints/{scenario.prefix}/job"
    overrides = {"job.checkpoint_location": location, "kafka.max_offsets_per_trigger": 60}
    path = scenario.write_config(tmp_path / "job.yaml", **overrides)
    s3 = load_config(path).s3
    table = scenario.table("orders")

    # The first two runs in this process (the shared session has the stack's S3 settings, as
    # spark-submit's has); the last through the CLI, after `icesink offsets reset`.
    Job(spark, scenario.config(**overrides)).run()
    cp = checkpoints.place(location, s3)
    held = objects(cp)
    assert {"offsets/0", "offsets/1", "commits/0", "commits/1", "metadata"} <= set(held), held
    produce(topic, [{"id": i} for i in range(100, 130)])
    Job(spark, scenario.config(**overrides)).run()  # from Spark's checkpoint on S3: only the 30 new records
    spark.sql(f"REFRESH TABLE {table}")
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect()) == list(range(130))

    produce(topic, [{"id": i} for i in range(130, 150)])
    reset = subprocess.run(
        [sys.executable, "-m", "icesink", "offsets", "reset", "-c", str(path)],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert reset.returncode == 0, reset.stderr
    assert "S3 has no rename; copying its" in reset.stderr
    assert objects(cp) == [], "the checkpoint's objects are deleted once copied"
    moved = [line.split(" moved to ")[1] for line in reset.stderr.splitlines() if " moved to " in line]
    assert len(moved) == 1, reset.stderr
    assert moved[0].startswith(location + ".moved-"), reset.stderr
    aside = set(objects(checkpoints.place(moved[0], s3)))
    assert set(held) <= aside, "every object of the checkpoint was copied aside"
    assert checkpoints.read_starting(location, s3) is not None, "the starting offsets are next to it on S3"

    again = run_cli(path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "starting from the offsets of `icesink offsets reset`" in again.stderr
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect()) == list(range(150))
    assert checkpoints.read_starting(location, s3) is None, "retired after the first batch"
    offsets = codec.decode(snapshots(spark, table)[-1]["summary"][codec.OFFSETS_KEY])
    assert sum(offsets[TopicPartition(topic, p)] for p in (0, 1)) == 150
