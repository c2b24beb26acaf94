"""Integration fixtures: each test's private topics, namespace and checkpoint (the session is
tests/conftest.py's `spark`, here the full one with the Iceberg catalog)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dev.kit.scenario import Scenario


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
