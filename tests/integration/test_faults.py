"""Fault injection: crashes, lost answers, concurrent writers, zombies, outages and bad input, each
followed by the exactly-once oracle (`oracle.check`): the table holds every good record once, the
dead-letter table every poison record once, the offsets reach the topics' ends, Spark's checkpoint
agrees (or trails by the one batch a crash left), and every file the table references exists.

The job runs as users run it: `icesink run` in its own process, faults injected through the
environment-gated hooks of `icesink.runtime.faults`, by stopping services of the stack, or by a proxy.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from dev.kit import oracle
from dev.kit.endpoints import CATALOG_URI, KAFKA, REGISTRY_URL
from dev.kit.kafka import create_topics, end_offsets, produce
from dev.kit.oracle import JSON_POISON, Ledger
from dev.kit.scenario import Scenario
from icesink.iceberg import snapshot_offsets as codec
from icesink.job.query import Job
from icesink.runtime import faults
from tests.support.catalog_proxy import CatalogProxy
from tests.support.cli import finish, pause_env, paused, run_cli, stack, start_cli, tail, while_running
from tests.support.spark import snapshots, table_exists, table_offsets
from tests.support.wait import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.faults]

KILLED = (-signal.SIGKILL, 128 + signal.SIGKILL)


def dead_letters(scenario: Scenario) -> str:
    return f"icesink.{scenario.namespace}.dead_letters"


@pytest.fixture
def restore_stack() -> Iterator[None]:
    """Whatever a test stopped is running again afterwards, even when the test failed."""
    yield
    for service in ("s3", "catalog", "registry", "kafka"):
        stack("start", service)


# ---------------------------------------------------------------- 1, 2: crashes


# Each worst moment of batch 1, one run after another: every run replays the batch the run before
# it was killed in, and is killed at the next moment of that replay; the last run goes to the end.
CRASHES = ["mid-write", "executor-write", "after-commit"]


def test_crashes_at_the_worst_moments_of_a_replayed_batch_replay_once(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """Batch 1 killed while the tables' files are written; its replay losing a Python worker after
    it wrote its files (Spark fails the batch); the next killed after every table and the
    dead-letter table committed and before Spark's commit log; the last run finds batch 1 in the
    tables and goes on. (A kill between the dead-letter table's commit and the tables':
    test_direct_letters.py.) Poison in
    every batch of both tables (their records go Spark's way, with dead letters). At the end every
    good record is in its table once, every poison record in the dead-letter table once, and the
    files the killed writes left are referenced by no snapshot."""
    orders, refunds = scenario.topic("orders.20240201"), scenario.topic("refunds.20240201")
    create_topics(orders, refunds)
    ledger = Ledger()
    for _ in range(4):  # a poison record every 31-52 offsets of each partition: in each batch's share
        for partition in (0, 1):
            ledger.good(orders, 50, partition)
            ledger.poison(orders, JSON_POISON[:2], partition)
            ledger.good(refunds, 30, partition)
            ledger.poison(refunds, JSON_POISON[2:3], partition)
    config = scenario.write_config(tmp_path / "job.yaml", **{"kafka.max_offsets_per_trigger": 300})
    tables = [scenario.table("orders"), scenario.table("refunds")]
    letters = dead_letters(scenario)
    written = [*tables, letters]

    def stored() -> set[str]:
        return set().union(*(oracle.data_files_in_storage(spark, t) for t in written if table_exists(spark, t)))

    left: dict[str, set[str]] = {}  # the files each killed write added
    for point in CRASHES:
        before = stored()
        crashed = run_cli(config, env={faults.ENV: f"{point}:1"})
        if point == "executor-write":  # only a Python worker died: Spark fails the task, the job exits
            assert crashed.returncode == 1, crashed.stderr[-3000:]
        else:
            assert crashed.returncode in KILLED, crashed.stderr[-3000:]
            assert f"SIGKILL at {point} of batch 1" in crashed.stderr
        counts = {t: len(snapshots(spark, t)) for t in written}
        batches = 2 if point == "after-commit" else 1  # the tables hold batch 0, and batch 1 once committed
        assert counts == {**dict.fromkeys(tables, batches), letters: batches}, f"{point}: {counts}"
        left[point] = stored() - before
        ledger.good(orders, 20)  # the stream goes on while the job is down

    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "already holds these offsets" in resumed.stderr, "Spark replays batch 1 again; the tables drop it"
    for table, topic in zip(tables, (orders, refunds), strict=True):
        oracle.check(spark, ledger, table, [topic], letters, scenario.checkpoint)
    referenced = set().union(*(set(oracle.referenced_files(spark, t)) for t in written))
    for point in ("mid-write", "executor-write"):
        assert left[point] - referenced, (
            f"{point}: the killed write's files stay unreferenced (`maintain` removes them)"
        )


# A Python worker dying after the one-pass job wrote its files (executor-write), before any table
# was created: tests/integration/test_direct_connect.py, and test_direct_cdc.py for its tables of changes.
def test_a_crash_after_the_one_pass_job_wrote_the_tables_files_replays_once(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """One Spark job wrote every table's files (batch/direct.py) and the job dies before any
    commit. Batch 0: the tables did not exist, the job staged them (their location and field ids)
    and created them once their files were written: created, no snapshot."""
    orders, refunds = scenario.topic("orders"), scenario.topic("refunds")
    create_topics(orders, refunds)
    ledger = Ledger()
    ledger.good(orders, 40)
    ledger.good(refunds, 30)
    config = scenario.write_config(tmp_path / "job.yaml")
    tables = [scenario.table("orders"), scenario.table("refunds")]

    crashed = run_cli(config, env={faults.ENV: "mid-write:0"})
    assert crashed.returncode in KILLED, crashed.stderr[-3000:]
    assert [len(snapshots(spark, t)) for t in tables] == [0, 0], "created, nothing committed"

    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert re.search(r"batch 0 timings: .*direct", resumed.stderr), "the replay took the one-pass job too"
    for table, topic in zip(tables, (orders, refunds), strict=True):
        oracle.check(spark, ledger, table, [topic], dead_letters(scenario), scenario.checkpoint)
    stored = set().union(*(oracle.data_files_in_storage(spark, t) for t in tables))
    referenced = set().union(*(set(oracle.referenced_files(spark, t)) for t in tables))
    assert stored - referenced, "the killed batch's files stay unreferenced (`icesink maintain` removes them)"


# ---------------------------------------------------------------- 3: lost or corrupt checkpoint


def test_corrupt_checkpoint_fails_loudly_and_a_deleted_one_resumes_from_the_tables(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("visits.20240202")
    create_topics(topic)
    ledger = Ledger()
    ledger.good(topic, 200)
    config = scenario.write_config(tmp_path / "job.yaml", **{"kafka.max_offsets_per_trigger": 120})
    Job(spark, scenario.config(**{"kafka.max_offsets_per_trigger": 120})).run()  # the job before: in-process
    table = scenario.table("visits")
    held = len(snapshots(spark, table))

    ledger.good(topic, 100)
    last = max((p for p in (scenario.checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    last.write_text("v1\n{not json")
    corrupt = run_cli(config)
    assert corrupt.returncode == 1
    assert "icesink: error" in corrupt.stderr
    assert len(snapshots(spark, table)) == held, "nothing committed from a corrupt checkpoint"

    # Lost, and the job told to re-read the topic from its start: the tables drop what they hold.
    shutil.rmtree(scenario.checkpoint)
    limits = {"kafka.max_offsets_per_trigger": 120, "kafka.starting_offsets": "earliest"}
    earliest = scenario.write_config(tmp_path / "earliest.yaml", **limits)
    resumed = run_cli(earliest)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "already holds these offsets" in resumed.stderr
    oracle.check(spark, ledger, table, [topic], checkpoint=scenario.checkpoint)


def test_a_checkpoint_deleted_while_the_stream_runs_restarts_from_the_tables(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic, other = scenario.topic("views.20240203"), scenario.topic("clicks.20240203")
    create_topics(topic, other)
    ledger = Ledger()
    ledger.good(topic, 150)
    ledger.good(other, 40, partition=0)  # partition 1 of `other` stays empty: no table holds it
    running = scenario.write_config(
        tmp_path / "job.yaml", **{"job.trigger": {"mode": "processing-time", "interval": "1 second"}}
    )
    table = scenario.table("views")
    log = tmp_path / "job.log"
    job = start_cli(running, log)
    try:
        ends = end_offsets(topic)
        held = while_running(job, log, lambda: table_offsets(spark, table) == {tp: o for tp, o in ends.items() if o})
        wait_until(held, 300, lambda: f"{table} to hold {ends}:\n{tail(log)}")
        shutil.rmtree(scenario.checkpoint)  # the pod's disk is gone while the job runs...
        job.kill()  # ...and the pod with it
        job.wait(30)
    finally:
        if job.poll() is None:
            job.kill()
    shutil.rmtree(scenario.checkpoint, ignore_errors=True)  # whatever Spark wrote again before the kill
    tables = {t: table_offsets(spark, t) for t in (table, scenario.table("clicks"))}
    ledger.good(topic, 30)
    ledger.good(other, 5, partition=1)
    lacking = sum(end - tables[scenario.table("views")].get(tp, 0) for tp, end in end_offsets(topic).items())
    lacking += sum(end - tables[scenario.table("clicks")].get(tp, 0) for tp, end in end_offsets(other).items())

    resumed = run_cli(scenario.write_config(tmp_path / "again.yaml"))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    err = resumed.stderr
    assert f"new checkpoint: starting from the offsets of the 2 table(s) of namespace {scenario.namespace}" in err
    assert f"topic {other}: 1 partition(s) from the tables (0@40); 1 at earliest (no table holds them)" in err
    assert f"topic {topic}: 2 partition(s) from the tables" in err
    read = [int(m) for m in re.findall(r"batch \d+: (\d+) record\(s\) from", err)]
    assert sum(read) == lacking == 35, f"the restart read {read} record(s); the tables lacked {lacking}"
    assert "already holds these offsets" not in err
    oracle.check(spark, ledger, table, [topic], checkpoint=scenario.checkpoint)
    oracle.check(spark, ledger, scenario.table("clicks"), [other])


# ---------------------------------------------------------------- 4, 10: concurrent writers


def test_compaction_and_a_foreign_append_between_check_and_commit(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("carts.20240203")
    create_topics(topic)
    ledger = Ledger()
    ledger.good(topic, 200)
    config = scenario.write_config(tmp_path / "job.yaml", **{"kafka.max_offsets_per_trigger": 100})
    Job(spark, scenario.config(**{"kafka.max_offsets_per_trigger": 100})).run()  # batches 0 and 1: small files
    table = scenario.table("carts")

    ledger.good(topic, 100)
    env, release = pause_env(tmp_path, "before-table-commit", 2)
    log = tmp_path / "job.log"
    job = start_cli(config, log, env)
    paused(release, job, log)
    # Between the job's offset check and its commit: a compaction and another writer's append.
    spark.sql(
        f"CALL icesink.system.rewrite_data_files(table => '{table}', options => map('min-input-files', '2'))"
    ).collect()
    spark.sql(f"INSERT INTO {table} (id, v) VALUES (-1, 'written by someone else')")
    release.touch()
    output = finish(job, log)
    assert job.returncode == 0, output[-3000:]

    ops = [s["operation"] for s in snapshots(spark, table)]
    assert ops[-3:] == ["replace", "append", "append"], ops
    oracle.check(spark, ledger, table, [topic], checkpoint=scenario.checkpoint, extra_ids=[-1])


def test_a_zombie_job_on_the_same_tables_is_fenced(spark: SparkSession, scenario: Scenario, tmp_path: Path) -> None:
    topic = scenario.topic("clicks.20240204")
    create_topics(topic)
    ledger = Ledger()
    ledger.good(topic, 300)
    first = scenario.write_config(tmp_path / "a.yaml")
    second = scenario.write_config(tmp_path / "b.yaml", **{"job.checkpoint_location": str(tmp_path / "other")})
    table = scenario.table("clicks")

    env, release = pause_env(tmp_path, "before-table-commit", 0)
    log = tmp_path / "a.log"
    zombie = start_cli(first, log, env)
    paused(release, zombie, log)  # planned and checked, about to commit
    other = run_cli(second)
    assert other.returncode == 0, other.stderr[-3000:]
    release.touch()
    output = finish(zombie, log)

    assert zombie.returncode == 1, output[-3000:]
    assert f"table {scenario.namespace}.{scenario.prefix}_clicks: offsets changed while the batch was written" in output
    assert "is another job writing this table? nothing was committed" in output
    assert len(snapshots(spark, table)) == 1
    oracle.check(spark, ledger, table, [topic], checkpoint=tmp_path / "other")


def test_another_job_on_other_topics_of_the_same_table_commits_between_check_and_commit(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    # Two daily topics of one table, each read by its own job (their checkpoints apart): legal,
    # and the offsets of each must survive the other's commits.
    first, second = scenario.topic("views.20240205"), scenario.topic("views.20240206")
    create_topics(first, second, partitions=1)
    produce(first, [{"id": i} for i in range(50)])
    produce(second, [{"id": 1000 + i} for i in range(30)])
    a = scenario.write_config(tmp_path / "a.yaml", **{"kafka.subscribe_pattern": f"^{first}$"})
    b = scenario.write_config(
        tmp_path / "b.yaml",
        **{"kafka.subscribe_pattern": f"^{second}$", "job.checkpoint_location": str(tmp_path / "other")},
    )
    table = scenario.table("views")

    env, release = pause_env(tmp_path, "before-table-commit", 0)
    log = tmp_path / "a.log"
    job = start_cli(a, log, env)
    paused(release, job, log)  # planned on a table without offsets, about to commit
    other = run_cli(b)
    assert other.returncode == 0, other.stderr[-3000:]
    release.touch()
    output = finish(job, log)

    assert job.returncode == 0, output[-3000:]
    assert "another writer committed offsets of other topics; committing on top" in output
    ids = sorted(r.id for r in spark.sql(f"SELECT id FROM {table}").collect())
    assert ids == [*range(50), *range(1000, 1030)], "each record once"
    snaps = snapshots(spark, table)
    assert len(snaps) == 2
    assert codec.decode(snaps[-1]["summary"][codec.OFFSETS_KEY]) == end_offsets(first, second), "both jobs' offsets"


@pytest.mark.parametrize(
    ("point", "together"),
    [("before-multi-table-commit", True), ("before-multi-table-staging", True), ("before-table-commit", False)],
    ids=["one-request", "one-request-before-staging", "per-table"],
)
def test_one_fenced_table_among_twelve_the_others_commit_and_the_restart_adds_nothing_twice(
    spark: SparkSession, scenario: Scenario, tmp_path: Path, point: str, together: bool
) -> None:
    """Another job commits one table's records between the batch's offset checks and its commit
    (or, in one request, before its snapshots are staged: the staging must not take the other
    job's commit for the table as planned): in one request (catalog.multi_table_commit), the
    catalog refuses the request and the tables are committed one by one, as without it: the
    victim is refused, the others commit."""
    names = [f"t{i:02d}" for i in range(12)]
    topics = [scenario.topic(n) for n in names]
    create_topics(*topics, partitions=1)
    ledger = Ledger()
    for t in topics:
        ledger.good(t, 7, partition=0)
    # Batch 0 (4 records a topic: 54 x 7/84 = 4.5, floored) creates the 12 tables side by side;
    # batch 1 (the other 3 a topic) is the one fenced.
    config = scenario.write_config(
        tmp_path / "job.yaml", **{"kafka.max_offsets_per_trigger": 54, "catalog.multi_table_commit": together}
    )

    env, release = pause_env(tmp_path, point, 1)
    log = tmp_path / "job.log"
    job = start_cli(config, log, env)
    paused(release, job, log)  # every table's files written, their commits about to go
    victim = names[7]
    zombie = scenario.write_config(
        tmp_path / "zombie.yaml",
        **{"job.checkpoint_location": str(tmp_path / "zombie"), "kafka.subscribe_pattern": f"^{topics[7]}$"},
    )
    other = run_cli(zombie)  # another job commits the victim's records first (from the tables' offsets)
    assert other.returncode == 0, other.stderr[-3000:]
    release.touch()
    output = finish(job, log)

    assert job.returncode == 1, output[-3000:]
    assert f"table {scenario.namespace}.{scenario.prefix}_{victim}: offsets changed while the batch was written" in (
        output
    )
    assert ("the catalog refused the multi-table commit" in output) is together
    tables = [scenario.table(n) for n in names]
    union = " UNION ALL ".join(
        f"SELECT '{n}' AS t, count(*) AS snaps FROM {table}.snapshots" for n, table in zip(names, tables, strict=True)
    )
    snaps = {r.t: r.snaps for r in spark.sql(union).collect()}
    assert snaps == {n: 2 for n in names}, "11 tables committed batch 1, the victim got it from the other job"

    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    union = " UNION ALL ".join(f"SELECT '{t}' AS t, id FROM {table}" for t, table in zip(topics, tables, strict=True))
    rows: dict[str, list[int]] = {}
    for r in spark.sql(union).collect():
        rows.setdefault(r.t, []).append(r.id)
    assert {t: sorted(ids) for t, ids in rows.items()} == {t: sorted(ledger.ids([t])) for t in topics}, (
        "every table holds each of its records once"
    )
    for n in (names[0], victim, names[-1]):
        oracle.check(spark, ledger, scenario.table(n), [scenario.topic(n)])


# ---------------------------------------------------------------- 5: commit outcome unknown


def test_lost_commit_answers_are_settled_from_the_table(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    """Four batches in a row whose commit answers are lost after the catalog applied them: the
    connection dropped, a 503 (a gateway's error; a 502 is answered the same), a 503 and the
    catalog unreachable for 15 s (the job cannot even look), a drop again right after. Each batch is
    settled from the table: committed once, never again."""
    topic = scenario.topic("payments.20240205")
    create_topics(topic, partitions=1)  # 100 records a batch, exactly: four batches
    ledger = Ledger()
    ledger.good(topic, 400)
    table = scenario.table("payments")
    lost = ["drop", "503", "outage", "drop"]
    with CatalogProxy(CATALOG_URI, lost) as proxy:
        config = scenario.write_config(
            tmp_path / "job.yaml", **{"catalog.uri": proxy.url, "kafka.max_offsets_per_trigger": 100}
        )
        result = run_cli(config)
    (tmp_path / "job.log").write_text(result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    assert proxy.faults == lost, "every batch's commit answer was lost"
    assert proxy.refused > 0, "the catalog was unreachable right after the third lost answer"
    assert len(snapshots(spark, table)) == 4, "each batch exactly once"
    oracle.check(spark, ledger, table, [topic], checkpoint=scenario.checkpoint)


# ---------------------------------------------------------------- 6: services down


@pytest.mark.parametrize("service", ["catalog", "s3"])
def test_catalog_or_s3_down_at_commit_time_holds_the_stream(
    service: str, spark: SparkSession, scenario: Scenario, tmp_path: Path, restore_stack: None
) -> None:
    topic = scenario.topic("views.20240206")
    create_topics(topic)
    ledger = Ledger()
    ledger.good(topic, 200)
    config = scenario.write_config(tmp_path / "job.yaml", **{"kafka.max_offsets_per_trigger": 100})
    table = scenario.table("views")
    env, release = pause_env(tmp_path, "before-table-commit", 0)
    log = tmp_path / "job.log"
    job = start_cli(config, log, env)
    paused(release, job, log)

    stack("stop", service)
    release.touch()
    if service == "catalog":  # the commit fails at once; the job runs the batch again and again
        retrying = while_running(job, log, lambda: "running it again" in log.read_text())
        wait_until(retrying, 120, lambda: f"the job to run the batch again:\n{tail(log)}")
    time.sleep(20)  # down for a while (S3's client waits it out inside the commit)
    assert job.poll() is None, f"the job must hold, not end:\n{log.read_text()[-3000:]}"
    assert "batch 0: 100 record(s)" not in log.read_text(), "nothing committed while down"
    stack("start", service)
    output = finish(job, log)

    assert job.returncode == 0, output[-3000:]
    assert len(snapshots(spark, table)) == 2, "each batch once"
    oracle.check(spark, ledger, table, [topic], checkpoint=scenario.checkpoint)


def test_registry_down_holds_the_stream(
    spark: SparkSession, scenario: Scenario, tmp_path: Path, restore_stack: None
) -> None:
    topic = scenario.topic("trips.20240207")
    create_topics(topic)
    ledger = Ledger()
    ledger.good_avro(topic, 150)  # registers the schema before the registry goes down
    config = scenario.write_config(
        tmp_path / "job.yaml", **{"decode.format": "avro", "decode.registry": {"url": REGISTRY_URL}}
    )
    stack("stop", "registry")
    log = tmp_path / "job.log"
    job = start_cli(config, log)
    retrying = while_running(job, log, lambda: "running it again" in log.read_text())
    wait_until(retrying, 180, lambda: f"the job to run the batch again:\n{tail(log)}")
    stack("start", "registry")
    output = finish(job, log)
    assert job.returncode == 0, output[-3000:]
    assert "running it again" in output
    # No record was dead-lettered for the outage: they waited for the registry.
    oracle.check(spark, ledger, scenario.table("trips"), [topic], dead_letters(scenario), scenario.checkpoint)


# ---------------------------------------------------------------- 7: broker restarts


# A killed broker (no clean shutdown: its clients see connections drop mid-request, and the
# restart recovers its logs) is the harder case; a clean stop is the same for the job but gentler.
@pytest.mark.parametrize("how", ["kill"])
def test_broker_restart_while_the_job_runs(
    how: str, spark: SparkSession, scenario: Scenario, tmp_path: Path, restore_stack: None
) -> None:
    topic = scenario.topic("rides.20240208")
    create_topics(topic)
    ledger = Ledger()
    ledger.good(topic, 100)
    config = scenario.write_config(
        tmp_path / "job.yaml", **{"job.trigger": {"mode": "processing-time", "interval": "2 seconds"}}
    )
    table = scenario.table("rides")
    log = tmp_path / "job.log"
    job = start_cli(config, log)
    try:
        # Batch 0 committed (its timings are logged after the commit; other lines name it before).
        first_batch = while_running(job, log, lambda: "batch 0 timings:" in log.read_text())
        wait_until(first_batch, 240, lambda: f"batch 0 timings:\n{tail(log)}")
        stack("stop", "kafka", *(["--kill"] if how == "kill" else []))
        time.sleep(5)
        stack("start", "kafka")
        ledger.good(topic, 100)
        wait_until(while_running(job, log, lambda: caught_up(spark, table, topic)), 240, lambda: tail(log))
    finally:
        job.send_signal(signal.SIGINT)
        finish(job, log, timeout=120)
    oracle.check(spark, ledger, table, [topic])


def caught_up(spark: SparkSession, table: str, topic: str) -> bool:
    return table_offsets(spark, table) == end_offsets(topic)  # {} while the table does not exist


# ---------------------------------------------------------------- 8: topics deleted, recreated, aged out


def test_offsets_aged_out_by_retention(spark: SparkSession, scenario: Scenario, tmp_path: Path) -> None:
    topic = scenario.topic("logins.20240209")
    create_topics(topic, partitions=1)
    ledger = Ledger()
    ledger.good(topic, 50)
    Job(spark, scenario.config()).run()  # the job before: in-process
    table = scenario.table("logins")

    ledger.good(topic, 50)
    admin = AdminClient({"bootstrap.servers": KAFKA})
    for future in admin.delete_records([KafkaTP(topic, 0, 80)]).values():
        future.result(timeout=30)  # as retention would: offsets 50..79 are gone unread
    ledger.forget(lambda s: not 50 <= s.offset < 80)

    strict = run_cli(scenario.write_config(tmp_path / "strict.yaml", **{"kafka.fail_on_data_loss": True}))
    assert strict.returncode == 1
    assert "icesink: error" in strict.stderr
    assert topic in strict.stderr
    assert len(snapshots(spark, table)) == 1, "nothing committed"

    lenient = run_cli(scenario.write_config(tmp_path / "lenient.yaml", **{"kafka.fail_on_data_loss": False}))
    assert lenient.returncode == 0, lenient.stderr[-3000:]
    oracle.check(spark, ledger, table, [topic], checkpoint=scenario.checkpoint)


def test_a_recreated_topic_is_refused_until_the_table_is_rewound(
    spark: SparkSession, scenario: Scenario, tmp_path: Path
) -> None:
    topic = scenario.topic("signups.20240210")
    create_topics(topic, partitions=1)
    ledger = Ledger()
    ledger.good(topic, 60)
    config = scenario.write_config(tmp_path / "job.yaml", **{"kafka.fail_on_data_loss": False})
    Job(spark, scenario.config(**{"kafka.fail_on_data_loss": False})).run()  # the job before: in-process
    table = scenario.table("signups")

    admin = AdminClient({"bootstrap.servers": KAFKA})
    admin.delete_topics([topic])[topic].result(timeout=30)

    def recreated() -> bool:
        try:
            create_topics(topic, partitions=1)
            return True
        except Exception:  # deletion is asynchronous: the topic may still exist
            return False

    wait_until(recreated, 60, f"{topic} to be created again")
    old = set(ledger.ids([topic]))
    ledger.forget(lambda s: False)
    ledger.good(topic, 20)  # offsets 0..19 again

    # Spark's checkpoint still knows offset 60: Spark itself fails, naming the topic.
    spark_refused = run_cli(scenario.write_config(tmp_path / "strict.yaml", **{"kafka.fail_on_data_loss": True}))
    assert spark_refused.returncode == 1
    assert topic in spark_refused.stderr
    # Without the checkpoint (or with fail_on_data_loss false) only the table knows: the job refuses.
    shutil.rmtree(scenario.checkpoint)
    refused = run_cli(config)
    assert refused.returncode == 1, refused.stderr[-3000:]
    error = next(line for line in refused.stderr.splitlines() if line.startswith("icesink: error"))
    assert f"{topic}[0]: the table's next offset is 60, the log ends at 20" in error, error
    assert f"icesink offsets reset --topic {topic} --to-earliest --rewind" in error
    assert len(snapshots(spark, table)) == 1, "nothing committed"

    command = ["offsets", "reset", "--config", str(config), "--topic", topic, "--to-earliest", "--rewind"]
    reset = subprocess.run([sys.executable, "-m", "icesink", *command], capture_output=True, text=True, timeout=300)
    assert reset.returncode == 0, reset.stderr[-3000:]
    resumed = run_cli(config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    oracle.check(spark, ledger, table, [topic], extra_ids=old)


# ---------------------------------------------------------------- 9: poison records


def test_poison_of_every_kind_among_good_records(spark: SparkSession, scenario: Scenario, tmp_path: Path) -> None:
    topic = scenario.topic("events.20240211")
    create_topics(topic)
    ledger = Ledger()
    for _ in range(3):
        ledger.good(topic, 40)
        ledger.poison(topic, JSON_POISON)
    config = scenario.write_config(tmp_path / "job.yaml", **{"kafka.max_offsets_per_trigger": 60})
    assert run_cli(config).returncode == 0
    oracle.check(spark, ledger, scenario.table("events"), [topic], dead_letters(scenario), scenario.checkpoint)
    Job(spark, scenario.config(**{"kafka.max_offsets_per_trigger": 60})).run()  # a rerun adds nothing
    oracle.check(spark, ledger, scenario.table("events"), [topic], dead_letters(scenario), scenario.checkpoint)
