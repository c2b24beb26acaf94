"""Integration fixtures: each test's private topics, namespace and checkpoint (the session is
tests/conftest.py's `spark`, here the full one with the Iceberg catalog), and the driver JVM
archive of the job processes tests start (dev/kit/jvm_archive.py)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dev.kit import jvm_archive
from dev.kit.kafka import create_topics, produce
from dev.kit.scenario import Scenario

log = logging.getLogger(__name__)


@pytest.fixture(scope="session", autouse=True)
def job_jvm_archive(stack: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Job processes map their driver's classes from an archive and JIT with C1 alone: 32 -> 18.5 s
    for a small job. A machine without an archive for its Java and classpath makes one with a
    small job run (~75 s), in the background while the session's first tests run (most run
    Spark in this process, not jobs): a job started before it is there runs without it
    (`jvm_archive.options_now`), and so does every job if its run failed."""
    archive = jvm_archive.archive_path()
    maker = None
    if not archive.exists():
        maker = threading.Thread(
            target=_make_archive, args=(archive, tmp_path_factory.mktemp("jvm-archive")), daemon=True
        )
        maker.start()
    with pytest.MonkeyPatch.context() as env:
        env.setenv(jvm_archive.ENV, jvm_archive.using_options(archive))
        yield
    if maker is not None:
        maker.join(timeout=600)
    jvm_archive.keep_recent(archive)


def _make_archive(archive: Path, tmp: Path) -> None:
    scenario = Scenario.new(tmp)
    topic = scenario.topic("warm")
    create_topics(topic)
    produce(topic, [b'{"id": %d, "name": "x"}' % i for i in range(10)])
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    conf = {"spark.ui.enabled": "false", "spark.driver.extraJavaOptions": jvm_archive.making_options(partial)}
    config = scenario.write_config(tmp / "job.yaml", **{"spark.conf": conf})
    done = subprocess.run(
        [sys.executable, "-m", "icesink", "run", "--config", str(config)], capture_output=True, text=True, timeout=600
    )
    if done.returncode == 0 and partial.exists():
        partial.replace(archive)  # whole or not at all: another session may be reading the cache
    else:
        partial.unlink(missing_ok=True)
        log.warning("no driver JVM archive (job exit %s): %s", done.returncode, done.stderr[-2000:])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    return Scenario.new(tmp_path)


@pytest.fixture
def every_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-pass job runs a task per core however small the batch (a test's few records would
    otherwise be one task: `direct.task_count`), so what depends on two tasks is tested."""
    from icesink.batch import direct

    monkeypatch.setattr(direct, "RECORDS_PER_TASK", 1)
