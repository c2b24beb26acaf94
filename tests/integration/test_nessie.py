"""The job on a second REST catalog, Project Nessie (`dev/stack up --with-nessie`), beside the
Iceberg fixture the other tests use: Nessie serves a table's metadata with its current snapshot
only (its history is Nessie's commit log, not the metadata's snapshot list), so a table's offsets
are read from its newest snapshot alone, and a maintenance snapshot must carry them."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import signal
import socket
from pathlib import Path
from urllib.parse import urlparse

import pytest
from pyspark.sql import SparkSession

from dev.kit.changes import Change, oracle, random_changes
from dev.kit.endpoints import NESSIE_URI
from dev.kit.kafka import create_topics, end_offsets, produce, produce_keyed
from dev.kit.scenario import Scenario
from icesink.iceberg import dangling, offsets_marker
from icesink.iceberg import snapshot_offsets as codec
from icesink.iceberg.tables import IcebergCatalog
from icesink.job.query import Job
from icesink.job.session import catalog_conf
from icesink.model import TableRef
from icesink.ops.maintain import maintain_table
from icesink.runtime import faults
from tests.support.cli import finish, pause_env, paused, run_cli, start_cli, tail, while_running
from tests.support.spark import snapshots, table_offsets
from tests.support.values import cdc_config, maintained_cdc_config, records, table_state
from tests.support.wait import wait_until

pytestmark = pytest.mark.nessie

NESSIE = "nessie"  # the Spark catalog name of Nessie's tables
KILLED = (-signal.SIGKILL, 128 + signal.SIGKILL)


@pytest.fixture(scope="module")
def nessie_catalog(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Nessie registered in the test session's Spark as catalog `nessie` (the job's own settings for
    it); fails, never skips, when Nessie is not up."""
    address = urlparse(NESSIE_URI)
    try:
        socket.create_connection((address.hostname, address.port), timeout=2).close()
    except OSError:
        pytest.fail(f"Nessie not reachable at {NESSIE_URI}; run `dev/stack up --with-nessie`", pytrace=False)
    probe = Scenario.new(tmp_path_factory.mktemp("nessie")).on(NESSIE, NESSIE_URI)
    for key, value in catalog_conf(probe.config()).items():
        spark.conf.set(key, value)


@pytest.fixture
def nessie(nessie_catalog: None, scenario: Scenario) -> Scenario:
    return scenario.on(NESSIE, NESSIE_URI)


def ids(spark: SparkSession, table: str) -> list[int]:
    spark.sql(f"REFRESH TABLE {table}")
    return sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect())


def holds_each_change_once(spark: SparkSession, table: str, changes: list[Change], topic: str) -> None:
    """The changelog table (read again) equals the oracle of last changes, no key twice, and its
    offsets are the topic's ends."""
    spark.sql(f"REFRESH TABLE {table}")
    state, rows = table_state(spark, table)
    assert rows == len(state), "no key twice"
    assert state == oracle(changes)
    assert table_offsets(spark, table) == end_offsets(topic)


def test_an_append_table_compacted_on_nessie_keeps_its_offsets_and_a_lost_checkpoint_adds_nothing_twice(
    spark: SparkSession, nessie: Scenario
) -> None:
    """Three batches into an append table on Nessie, then `maintain` compacts it: Nessie serves
    the compaction's snapshot alone, which must still say where the table is in Kafka. The
    checkpoint is then lost: the job resumes from the table (no record twice), and takes the
    records produced since."""
    topic = nessie.topic("orders")
    create_topics(topic, partitions=2)
    produce(topic, [{"id": i} for i in range(300)])
    config = nessie.config(**{"kafka.max_offsets_per_trigger": 100})
    Job(spark, config).run()
    table = nessie.table("orders")
    assert ids(spark, table) == list(range(300))
    assert table_offsets(spark, table) == end_offsets(topic)

    ref = TableRef(nessie.namespace, f"{nessie.prefix}_orders")
    result = maintain_table(spark, NESSIE, ref, dt.timedelta(days=3), None)
    assert result.rewritten_data_files > 1, result
    served = snapshots(spark, table)
    assert len(served) == 1, "Nessie serves the current snapshot only"
    assert served[0]["summary"].get(offsets_marker.MAINTENANCE_KEY) == offsets_marker.MARKER, served[0]
    assert table_offsets(spark, table) == end_offsets(topic), "the compaction's snapshot says where the table is"

    shutil.rmtree(nessie.checkpoint)  # the checkpoint is lost
    produce(topic, [{"id": i} for i in range(300, 350)])
    Job(spark, config).run()
    assert ids(spark, table) == list(range(350)), "resumed from the table: nothing twice, nothing lost"
    assert table_offsets(spark, table) == end_offsets(topic)


@pytest.mark.slow
def test_a_changelog_table_on_nessie_through_a_crash_after_its_commit(
    spark: SparkSession, nessie: Scenario, tmp_path: Path
) -> None:
    """A changelog table on Nessie, its job SIGKILLed right after a commit (before Spark's commit
    log has the batch), restarted: the replayed batch is found in the table and not applied
    again; the rows equal the oracle of last changes, the offsets are the topic's ends."""
    topic = nessie.topic("accounts")
    create_topics(topic, partitions=2)
    changes = list(random_changes(900, 120, 2, seed=11))
    produce_keyed(topic, records(changes))
    config = nessie.write_config(tmp_path / "job.yaml", **cdc_config(**{"kafka.max_offsets_per_trigger": 300}))
    crashed = run_cli(config, env={faults.ENV: "after-commit:1"})
    assert crashed.returncode in KILLED, crashed.stderr[-30000:]
    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    table = nessie.table("accounts")
    holds_each_change_once(spark, table, changes, topic)
    newest = snapshots(spark, table)[-1]["summary"]
    assert codec.OFFSETS_KEY in newest


@pytest.mark.slow
def test_the_jobs_maintenance_on_nessie_keeps_the_offsets_and_a_lost_checkpoint_adds_nothing(
    spark: SparkSession, nessie: Scenario, tmp_path: Path
) -> None:
    """A changelog table on Nessie at a 1 s trigger, maintained by the job once it has 3 live delete
    files. Its first run is paused right after its compaction committed (which Nessie then serves
    alone, without offsets) while the job commits batches on top of it; released, it goes on.
    Stopped at the end: the offsets are the topic's ends, and a run from a lost checkpoint commits
    nothing (it found them in the table). The rows equal the oracle of last changes."""
    topic = nessie.topic("ledger")
    create_topics(topic, partitions=2)
    changes = list(random_changes(1_600, 150, 2, seed=41))
    first, rest = changes[:400], changes[400:]
    produce_keyed(topic, records(first))
    overrides = maintained_cdc_config()
    config = nessie.write_config(tmp_path / "job.yaml", **overrides)
    table = nessie.table("ledger")
    log = tmp_path / "run.log"
    env, release = pause_env(tmp_path, "maintenance-before-marker", 1)
    job = start_cli(config, log, env)
    paused(release, job, log)
    held = table_offsets(spark, table)
    produce_keyed(topic, records(rest))
    wait_until(
        while_running(job, log, lambda: table_offsets(spark, table) not in ({}, held)), 180,
        lambda: f"a batch committed on the compaction, whose offsets Nessie hid:\n{tail(log)}",
    )  # fmt: skip
    release.touch()

    def caught_up() -> bool:
        return table_offsets(spark, table) == end_offsets(topic) and " done in " in log.read_text()

    wait_until(while_running(job, log, caught_up), 300, lambda: f"all changes, maintenance done:\n{tail(log)}")
    job.send_signal(signal.SIGTERM)
    out = finish(job, log)
    assert job.returncode == 0, out[-3000:]
    assert re.search(r"maintenance of \S+_ledger done in ", out), out[-3000:]
    assert re.search(r"committing on rewrite \d+, served without|beneath rewrite \d+ \(served alone\)", out), (
        "a batch committed while the compaction hid the offsets"
    )
    state, rows = table_state(spark, table)
    assert rows == len(state), "no key twice"
    assert state == oracle(changes)
    assert table_offsets(spark, table) == end_offsets(topic), "the offsets readable after the job's maintenance"

    lost = nessie.write_config(
        tmp_path / "lost.yaml", **{**overrides, "job.trigger.mode": "available-now",
                                   "job.checkpoint_location": str(tmp_path / "fresh")},
    )  # fmt: skip
    current = snapshots(spark, table)[-1]["snapshot_id"]
    again = run_cli(lost)
    assert again.returncode == 0, again.stderr[-3000:]
    spark.sql(f"REFRESH TABLE {table}")
    assert snapshots(spark, table)[-1]["snapshot_id"] == current, "nothing re-read, nothing committed"
    assert table_state(spark, table) == (state, rows)


@pytest.mark.slow
def test_a_batch_that_meets_two_rewrites_on_nessie_waits_for_their_marker_and_commits_on_it(
    spark: SparkSession, nessie: Scenario, tmp_path: Path
) -> None:
    """A changelog table on Nessie, its job paused between batch 2's offset check and its commit
    while maintenance commits what the job's own does in one run: a compaction, the marker that
    carries the offsets again, the removal of the deletes the compaction left dangling. The batch
    then meets a rewrite served alone, not committed on the snapshot it was planned on (the job
    kept the table as its batch 1 left it): it waits for the next marker (committed here once the
    job says it waits) and commits on top of it. Every change applied once; the offsets the
    topic's ends."""
    topic = nessie.topic("wallets")
    create_topics(topic, partitions=2)
    changes = list(random_changes(300, 40, 2, seed=7))
    produce_keyed(topic, records(changes))
    settings = cdc_config(**{"kafka.max_offsets_per_trigger": 100, "maintenance.tables": "none"})
    config = nessie.write_config(tmp_path / "job.yaml", **settings)
    env, release = pause_env(tmp_path, "before-table-commit", 2)
    log = tmp_path / "job.log"
    job = start_cli(config, log, env)
    paused(release, job, log)

    ref = TableRef(nessie.namespace, f"{nessie.prefix}_wallets")
    table = IcebergCatalog(spark, NESSIE).load(ref)
    assert table is not None
    was = offsets_marker.before(table)
    assert was is not None, "batches 0 and 1 committed"
    spark.sql(
        f"CALL {NESSIE}.system.rewrite_data_files(table => '{ref.qualified(NESSIE)}', options => "
        "map('delete-file-threshold', '1', 'min-input-files', '2', 'remove-dangling-deletes', 'false'))"
    ).collect()
    assert offsets_marker.keep_visible(spark, table, was, str(ref)), "the compaction hid the offsets"
    was = offsets_marker.before(table)
    assert was is not None
    removed = dangling.remove_dangling_deletes(spark, ref.qualified(NESSIE), table)
    assert removed.removed > 0, removed
    release.touch()

    def waiting() -> bool:
        return "waiting for the snapshot that carries them again" in log.read_text()

    wait_until(while_running(job, log, waiting), 120, lambda: f"the batch waits for the offsets:\n{tail(log)}")
    assert offsets_marker.keep_visible(spark, table, was, str(ref)), "the removal hid the offsets"
    out = finish(job, log)
    assert job.returncode == 0, out[-3000:]
    assert "rewrites served alone hide its offsets; committing on top" in out, out[-3000:]
    holds_each_change_once(spark, nessie.table("wallets"), changes, topic)


def test_json_gaining_fields_on_nessie_evolves_the_table_and_a_bad_record_is_a_dead_letter(
    spark: SparkSession, nessie: Scenario
) -> None:
    """Schema evolution through Nessie's REST API (a new top-level field, a new nested one), and
    the dead-letter table there: a record whose id is no longer a number is one, the others land."""
    topic = nessie.topic("signups")
    create_topics(topic, partitions=1)
    table = nessie.table("signups")
    produce(topic, [{"id": 1, "plan": "free", "profile": {"city": "Oslo"}}])
    Job(spark, nessie.config()).run()
    produce(
        topic,
        [
            {"id": 2, "plan": "pro", "profile": {"city": "Lima", "zip": "15001"}, "tags": {"a": 1}},
            {"id": "three", "plan": "team"},
        ],
    )
    Job(spark, nessie.config()).run()

    spark.sql(f"REFRESH TABLE {table}")
    columns = {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}
    assert columns == {
        "id": "bigint",
        "plan": "string",
        "profile": "struct<city:string,zip:string>",
        "tags": "struct<a:bigint>",
    }
    got = spark.sql(f"SELECT id, plan, profile.city, profile.zip, tags.a FROM {table} ORDER BY id").collect()
    assert [tuple(r) for r in got] == [(1, "free", "Oslo", None, None), (2, "pro", "Lima", "15001", 1)]
    letters = spark.sql(f"SELECT offset, stage, error_class FROM {NESSIE}.{nessie.namespace}.dead_letters").collect()
    assert [(r.offset, r.stage, r.error_class) for r in letters] == [(2, "convert", "TypeMismatch")]
    assert table_offsets(spark, table) == end_offsets(topic)
