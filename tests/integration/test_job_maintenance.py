"""Table maintenance inside the job (job/maintainer.py), against the stack: a changelog table kept
compacted while the stream runs, its maintenance meeting the job's commits, killed mid-way, and a
lost checkpoint after it; the table equals the oracle of last changes throughout."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dev.kit.changes import oracle, random_changes
from dev.kit.kafka import create_topics, end_offsets, produce_keyed
from dev.kit.scenario import Scenario
from icesink.iceberg import snapshot_offsets as codec
from icesink.runtime import faults
from tests.support.cli import finish, pause_env, paused, run_cli, start_cli, tail, while_running
from tests.support.metrics import free_port, scraped_into
from tests.support.spark import snapshots, table_offsets
from tests.support.values import maintained_cdc_config, records, table_state
from tests.support.wait import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.faults]

KILLED = (-signal.SIGKILL, 128 + signal.SIGKILL)


def replaces(spark: SparkSession, table: str) -> int:
    """Compactions committed to the table."""
    return sum(1 for s in snapshots(spark, table) if s["operation"] == "replace")


def committed_batches(spark: SparkSession, table: str) -> int:
    """Snapshots of the job's batches (those with offsets)."""
    return sum(1 for s in snapshots(spark, table) if codec.OFFSETS_KEY in s["summary"])


def dangling_deletes(spark: SparkSession, table: str) -> tuple[int, int]:
    """(live delete files, those of them no live row is old enough for) of an unpartitioned table:
    an equality delete applies only to data files of a lower data sequence number."""
    spark.sql(f"REFRESH TABLE {table}")
    row = spark.sql(
        f"""SELECT count_if(data_file.content = 2) AS live,
                   count_if(data_file.content = 2 AND sequence_number <= (
                       SELECT min(sequence_number) FROM {table}.entries WHERE status < 2 AND data_file.content = 0
                   )) AS dangling
            FROM {table}.entries WHERE status < 2"""
    ).first()
    assert row is not None
    return int(row.live), int(row.dangling)


def test_the_job_compacts_its_changelog_table_beside_its_commits_killed_mid_way_and_restarted(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """A changelog table at a 1 s trigger, maintained by the job once it has 3 live delete files:
    (1) the job's first maintenance run paused after its compaction committed, while the job
    commits more batches on top of it; then it removes the deletes that dangle on the table as it
    is by then, and rests (`maintenance.max_share`): the batches after it start no other run;
    (2) with more changes, the job killed right after its first maintenance run committed a
    compaction (before it removed the dangling deletes); (3) restarted, it goes on to the end, its
    metrics count its maintenance, and it is stopped with SIGTERM; (4) a lost
    checkpoint adds nothing. The table equals the oracle, no key twice, the offsets at the topic's
    ends, and no live delete file dangles after the last run."""
    topic = scenario.topic("ledger")
    create_topics(topic, partitions=2)
    changes = list(random_changes(2_700, 150, 2, seed=37))
    # The first changes make the first maintenance run due; the middle ones arrive while it is
    # paused (so batches commit beside it however fast the first were taken); the rested ones
    # after it, while the job rests; the last, in the next runs of the job.
    first, middle, rested, second = changes[:400], changes[400:1_600], changes[1_600:1_900], changes[1_900:]
    produce_keyed(topic, records(first))
    overrides = maintained_cdc_config()
    config = scenario.write_config(tmp_path / "job.yaml", **overrides)
    table = scenario.table("ledger")

    def caught_up() -> bool:
        held = [codec.decode(s["summary"][codec.OFFSETS_KEY]) for s in snapshots(spark, table)
                if codec.OFFSETS_KEY in s["summary"]]  # fmt: skip
        return bool(held) and held[-1] == end_offsets(topic)

    # (1) The job's first maintenance run paused once its compaction committed, while the job
    # commits three more batches (deletes of rewritten rows among them); then its dangling deletes
    # are removed on the table as it is by then. The job then rests for ~1,000 times the run, and
    # is stopped once it committed the rested changes: their deletes, and those committed during
    # the run, would have made another run due at once.
    env, release = pause_env(tmp_path, "maintenance-compacted", 1)
    log = tmp_path / "run1.log"
    resting = scenario.write_config(tmp_path / "resting.yaml", **{**overrides, "maintenance.max_share": 0.001})
    job = start_cli(resting, log, env)
    paused(release, job, log)
    assert replaces(spark, table) == 1
    batches = committed_batches(spark, table)
    produce_keyed(topic, records(middle))
    wait_until(
        while_running(job, log, lambda: committed_batches(spark, table) >= batches + 3), 180,
        lambda: f"three batches committed beside the paused maintenance:\n{tail(log)}",
    )  # fmt: skip
    release.touch()
    wait_until(while_running(job, log, lambda: " done in " in log.read_text()), 120, lambda: tail(log))
    produce_keyed(topic, records(rested))
    wait_until(while_running(job, log, caught_up), 180, lambda: f"the rested changes:\n{tail(log)}")
    job.send_signal(signal.SIGTERM)
    out = finish(job, log)
    assert job.returncode == 0, out[-3000:]
    assert re.search(r"maintenance of \S+_ledger: \d+ live delete files \(maintenance.delete_files: 3\)", out)
    assert re.search(r"maintenance rests \d+ s \(maintenance.max_share: 0.001\)", out), tail(log)
    assert len(re.findall(r"maintenance of \S+_ledger: ", out)) == 1, "no other run while the job rests"
    state, rows = table_state(spark, table)
    assert rows == len(state), "no key twice after the first maintenance run"

    # (2) More changes; the next run is killed once its first maintenance run committed a compaction.
    produce_keyed(topic, records(second))
    log = tmp_path / "run2.log"
    env = {faults.ENV: "maintenance-compacted:1", faults.ONCE_ENV: str(tmp_path / "killed-once")}
    job = start_cli(config, log, env)
    out = finish(job, log, timeout=600)
    assert job.returncode in KILLED, out[-3000:]
    assert "fault injection: SIGKILL at maintenance-compacted of batch 1" in out

    # (3) The restart goes on from the tables and Spark's checkpoint, to the end; stopped with
    # SIGTERM once its metrics count a maintenance run (its Prometheus endpoint, as a scraper sees it).
    port = free_port()
    served = scenario.write_config(
        tmp_path / "served.yaml", **overrides,
        **{"spark.conf": {"spark.ui.enabled": "true", "spark.ui.port": str(port)}},
    )  # fmt: skip
    log = tmp_path / "run3.log"
    job = start_cli(served, log)
    seen: dict[str, float] = {}

    def maintained() -> bool:
        return scraped_into(port, seen) and seen.get("maintenance_runs_Count", 0) >= 1

    wait_until(while_running(job, log, caught_up), 300, lambda: f"all changes:\n{tail(log)}")
    wait_until(while_running(job, log, maintained), 180, lambda: f"a maintenance run counted ({seen}):\n{tail(log)}")
    job.send_signal(signal.SIGTERM)
    out = finish(job, log)
    assert job.returncode == 0, out[-3000:]
    assert " done in " in out
    assert seen.get("maintenance_failures_Count", 0) == 0
    # The gauge is a run's own count: the deletes of batches committed while it ran stay live
    # (they are newer than the compacted files), so its value depends on the machine's pace.
    gauge = f"table_{scenario.namespace}_{scenario.prefix}_ledger_live_delete_files_Value"
    counted = {int(n) for n in re.findall(r"dangling delete file\(s\) removed \((\d+) live\)", out)}
    assert seen[gauge] in counted, (seen, counted)

    state, rows = table_state(spark, table)
    assert rows == len(state), "no key twice"
    assert state == oracle(changes), "maintenance beside the commits, a kill and a restart lost and doubled nothing"
    offsets = table_offsets(spark, table)
    assert offsets == end_offsets(topic)
    live, dangling = dangling_deletes(spark, table)
    assert dangling == 0, f"{dangling} of {live} live delete files dangle after the job's last maintenance run"
    assert replaces(spark, table) >= 3

    # (4) A lost checkpoint: a fresh one starts from the tables and adds nothing.
    lost = scenario.write_config(
        tmp_path / "lost.yaml", **{**overrides, "job.trigger.mode": "available-now",
                                   "job.checkpoint_location": str(tmp_path / "fresh")},
    )  # fmt: skip
    before = len(snapshots(spark, table))
    again = run_cli(lost)
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(snapshots(spark, table)) == before, "nothing re-read, nothing committed"
    assert table_state(spark, table) == (state, rows)
