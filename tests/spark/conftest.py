"""The spark tier: the code that builds Spark expressions, run on small hand-made DataFrames in
one local session (tests/conftest.py's `spark`: no stack, no catalog, no Kafka when run alone)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)
