"""The tests' class-data archive is keyed by the driver's classpath as the JVM checks it: paths
included (dev/kit/jvm_archive.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dev.kit.jvm_archive import (
    C1_ONLY,
    JARS_ENV,
    archive_key,
    classpath_folders,
    keep_recent,
    options_now,
    using_options,
)


def jars(folder: Path, sizes: dict[str, int]) -> Path:
    folder.mkdir(parents=True)
    for name, size in sizes.items():
        (folder / name).write_bytes(b"x" * size)
    return folder


def test_the_same_jars_in_another_clone_get_another_archive(tmp_path: Path) -> None:
    here = jars(tmp_path / "main" / "jars", {"spark-core.jar": 3, "iceberg.jar": 2})
    there = jars(tmp_path / "ci" / "jars", {"spark-core.jar": 3, "iceberg.jar": 2})
    assert archive_key("17", [here]) == archive_key("17", [here])
    assert archive_key("17", [here]) != archive_key("17", [there]), "the JVM refuses an archive of other paths"
    assert archive_key("17", [here]) != archive_key("25", [here])
    before = archive_key("17", [there])
    (there / "iceberg.jar").write_bytes(b"xyz")
    assert archive_key("17", [there]) != before, "another jar of the same name"
    before = archive_key("17", [there])
    os.utime(there / "iceberg.jar", (1_000, 1_000))
    assert archive_key("17", [there]) != before, "the same jar installed again (a new venv at the same path)"


def test_the_stacks_extra_jars_are_in_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stack = jars(tmp_path / "stack", {"iceberg-spark-runtime.jar": 4})
    monkeypatch.setenv(JARS_ENV, str(stack))
    assert classpath_folders()[1:] == [stack]
    with_one = archive_key("17", classpath_folders())
    (stack / "kafka-clients.jar").write_bytes(b"k")
    assert archive_key("17", classpath_folders()) != with_one


def test_only_the_archives_used_last_are_kept(tmp_path: Path) -> None:
    for i, name in enumerate(["driver-a.jsa", "driver-b.jsa", "driver-c.jsa", "driver-d.jsa"]):
        (tmp_path / name).write_bytes(b"x")
        os.utime(tmp_path / name, (1_000 + i, 1_000 + i))
    keep_recent(tmp_path / "driver-a.jsa")  # the oldest, used now
    assert sorted(p.name for p in tmp_path.iterdir()) == ["driver-a.jsa", "driver-c.jsa", "driver-d.jsa"]


def test_a_job_started_before_the_archive_is_made_runs_without_it(tmp_path: Path) -> None:
    archive = tmp_path / "driver-a.jsa"
    assert options_now(using_options(archive)) == C1_ONLY, "no warning of a missing archive"
    archive.write_bytes(b"x")
    assert options_now(using_options(archive)) == using_options(archive)
    assert options_now("") == ""
