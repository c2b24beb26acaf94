"""Integration fixtures: the running local stack and ONE SparkSession for the whole test session."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from pyspark.sql import SparkSession

from icesink.job.session import build_session
from tests.conftest import CATALOG_URI, KAFKA, S3_ENDPOINT
from tests.integration.helpers import Scenario


def _reachable(hostport: str) -> bool:
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def stack() -> None:
    """Fails (never skips) when the stack is down: a skipped integration test is no test."""
    endpoints = {"kafka": KAFKA, "catalog": urlparse(CATALOG_URI).netloc, "s3": urlparse(S3_ENDPOINT).netloc}
    down = [f"{name} ({addr})" for name, addr in endpoints.items() if not _reachable(addr)]
    if down:
        pytest.fail(f"local stack not reachable: {', '.join(down)}; run `scripts/stack up`", pytrace=False)


@pytest.fixture(scope="session")
def spark(stack: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    base = Scenario.new(tmp_path_factory.mktemp("session"))
    session = build_session(base.config())
    yield session
    session.stop()


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    return Scenario.new(tmp_path)
