"""Fixtures of every tier: the local stack's check, and ONE SparkSession for the whole pytest process."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from pyspark.sql import SparkSession

from dev.kit.endpoints import CATALOG_URI, KAFKA, S3_ENDPOINT
from dev.kit.scenario import Scenario
from icesink.job.session import WORKER_DAEMON, WORKER_ENV, build_session


def _reachable(hostport: str) -> bool:
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def stack() -> None:
    """Fails (never skips) when the stack is down: a skipped integration test is no test."""
    endpoints = {"kafka": KAFKA, "catalog": urlparse(CATALOG_URI).netloc, "s3": urlparse(S3_ENDPOINT).netloc}
    down = [f"{name} ({addr})" for name, addr in endpoints.items() if not _reachable(addr)]
    if down:
        pytest.fail(f"local stack not reachable: {', '.join(down)}; run `dev/stack up`", pytrace=False)


def _local_session() -> SparkSession:
    """A plain local session (no catalog, no jars, no Kafka), with the job's time zone and its Python
    workers run as the job runs them (their daemon and environment)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers must import icesink
    builder = (
        SparkSession.builder.master("local[1]")
        .appName("icesink-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for k, v in WORKER_ENV.items():
        builder = builder.config(f"spark.executorEnv.{k}", v)
    for k, v in WORKER_DAEMON.items():  # a local master, this interpreter, icesink installed
        builder = builder.config(k, v)
    return builder.getOrCreate()


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The session of every tier. A process can hold only one SparkContext, so it is the job's full
    session (Iceberg catalog, jars, the stack) when any collected test is an integration test, and
    a plain local one otherwise; the spark tier works on either."""
    if any(item.get_closest_marker("integration") for item in request.session.items):
        request.getfixturevalue("stack")
        session = build_session(Scenario.new(tmp_path_factory.mktemp("session")).config())
    else:
        session = _local_session()
    yield session
    session.stop()
