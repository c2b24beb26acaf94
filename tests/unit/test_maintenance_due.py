"""When the job maintains a table (job/maintenance_due.py) and the maintenance section's checks."""

from __future__ import annotations

from typing import Any

import pytest

from icesink.config import MaintainedTables, MaintenanceConfig, WriteMode, parse_config
from icesink.config.tables import TableSettings
from icesink.errors import ConfigError
from icesink.job.maintenance_due import Due, TableHealth, due, maintained, rest_after, turn

MINIMAL: dict[str, Any] = {
    "job": {"checkpoint_location": "/tmp/cp"},
    "kafka": {"bootstrap_servers": "k:9092", "subscribe_pattern": "^events$"},
    "catalog": {"uri": "http://c:8181"},
}
DEFAULTS = MaintenanceConfig()


def settings(mode: WriteMode, maintain: bool | None = None) -> TableSettings:
    return TableSettings(mode=mode, key_columns=("id",), partition_by=(), order_by=None, properties={},
                         maintain=maintain)  # fmt: skip


def test_tables_of_changes_are_maintained_by_default_append_tables_when_asked() -> None:
    assert maintained(settings(WriteMode.CHANGELOG), DEFAULTS.tables)
    assert maintained(settings(WriteMode.UPSERT), DEFAULTS.tables)
    assert not maintained(settings(WriteMode.APPEND), DEFAULTS.tables)
    assert maintained(settings(WriteMode.APPEND), MaintainedTables.ALL)
    assert not maintained(settings(WriteMode.CHANGELOG), MaintainedTables.NONE)
    # A table's own setting wins both ways.
    assert maintained(settings(WriteMode.APPEND, maintain=True), MaintainedTables.NONE)
    assert not maintained(settings(WriteMode.CHANGELOG, maintain=False), MaintainedTables.ALL)


def test_per_table_setting_reaches_the_resolved_settings() -> None:
    raw = {
        **MINIMAL,
        "tables": {"mode": "changelog", "key_columns": ["id"], "per_table": {"audit": {"maintain": False}}},
    }
    c = parse_config(raw, environ={})
    assert c.tables.settings_for("audit").maintain is False
    assert c.tables.settings_for("orders").maintain is None
    assert c.maintenance == DEFAULTS


def test_delete_files_ask_for_a_compaction_commits_for_a_full_run_never_within_the_interval() -> None:
    config = MaintenanceConfig(delete_files=5, commits=10, min_interval_s=60)
    assert due(TableHealth(commits=4, live_delete_files=4), config, now=1000.0) is None
    assert due(TableHealth(commits=4, live_delete_files=5), config, now=1000.0) == Due(
        "5 live delete files (maintenance.delete_files: 5)", full=False
    )
    assert due(TableHealth(commits=10, live_delete_files=None), config, now=1000.0) == Due(
        "10 commits since its last full maintenance (maintenance.commits: 10)", full=True
    )
    # Both: the full run, which compacts too.
    both = due(TableHealth(commits=10, live_delete_files=50), config, now=1000.0)
    assert both is not None
    assert both.full
    # Ran 30 s ago: not again yet, however many deletes; after the interval, yes.
    assert due(TableHealth(commits=50, live_delete_files=50, last_run=970.0), config, now=1000.0) is None
    assert due(TableHealth(commits=50, live_delete_files=50, last_run=930.0), config, now=1000.0) is not None


def test_the_delete_files_threshold_is_per_partition_the_commits_change() -> None:
    config = MaintenanceConfig(delete_files=5, commits=100, min_interval_s=0)
    # 16 partitions: 40 delete files are 2.5 a partition, not yet; 80 are 5.
    assert due(TableHealth(commits=3, live_delete_files=40, partitions=16), config, now=0.0) is None
    assert due(TableHealth(commits=3, live_delete_files=80, partitions=16), config, now=0.0) == Due(
        "80 live delete files (maintenance.delete_files: 5 per partition, 16 partitions)", full=False
    )


def test_defaults_compact_often_and_tidy_every_few_hundred_commits() -> None:
    assert (DEFAULTS.delete_files, DEFAULTS.commits, DEFAULTS.min_interval_s, DEFAULTS.expire_after) == (
        10,
        300,
        10,
        "1h",
    )
    # ... in at most a quarter of the job's time, a file group at a time.
    assert (DEFAULTS.max_share, DEFAULTS.concurrent_groups) == (0.25, 1)


def test_after_a_run_the_job_rests_so_its_runs_take_at_most_their_share_of_its_time() -> None:
    # A 20 s run at a quarter: 60 s of rest, so 20 of every 80 s at most; a half: as long as it ran.
    assert rest_after(20.0, 0.25) == 60.0
    assert rest_after(20.0, 0.5) == 20.0
    assert rest_after(20.0, 1.0) == 0.0


def test_after_a_rest_the_tables_never_maintained_go_first_then_the_longest_since_their_run() -> None:
    waiting = {
        "a": TableHealth(last_run=900.0),  # due again after every rest: it must not keep the others waiting
        "m": TableHealth(last_run=100.0),
        "z": None,  # a commit, but no figures yet
        "b": TableHealth(),  # never maintained
    }
    assert sorted(waiting, key=lambda name: turn(waiting[name], name)) == ["b", "z", "m", "a"]


@pytest.mark.parametrize("age", ["1h", "90m", "3d"])
def test_expire_after_takes_the_cli_s_ages(age: str) -> None:
    assert parse_config({**MINIMAL, "maintenance": {"expire_after": age}}, environ={}).maintenance.expire_after == age


def test_bad_maintenance_settings_name_their_key() -> None:
    raw = {**MINIMAL, "maintenance": {"expire_after": "1 hour", "delete_files": 0, "tables": "some", "max_share": 0,
                                      "concurrent_groups": 0}}  # fmt: skip
    with pytest.raises(ConfigError) as e:
        parse_config(raw, environ={})
    text = str(e.value)
    assert "maintenance.expire_after: Value error, '1 hour' is not an age such as 90m, 12h or 3d" in text
    assert "maintenance.delete_files" in text
    assert "maintenance.tables" in text
    assert "maintenance.max_share: Input should be greater than 0" in text
    assert "maintenance.concurrent_groups: Input should be greater than or equal to 1" in text
