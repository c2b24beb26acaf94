"""What a Python worker imports to run the one-pass tasks: none of the config's pydantic models
(icesink/modes.py: that import was a third of a worker's start, which every first batch waits for)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from icesink.config import UnknownTables, Unmatched, WriteMode
from icesink.modes import UnknownTables as TaskUnknownTables
from icesink.modes import Unmatched as TaskUnmatched
from icesink.modes import WriteMode as TaskWriteMode

_PROBE = """
import importlib, pkgutil, sys
import pyspark.worker  # what PySpark's worker holds before it unpickles a task
import icesink.tasks
for m in pkgutil.iter_modules(icesink.tasks.__path__):
    importlib.import_module("icesink.tasks." + m.name)
print(" ".join(sorted(m for m in sys.modules if m == "pydantic" or m == "yaml" or m.startswith("icesink.config"))))
"""


def test_the_tasks_modules_import_no_config() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], f"a task's import pulls in {done.stdout.strip()}"


@pytest.mark.parametrize(
    ("config", "task"),
    [(WriteMode, TaskWriteMode), (Unmatched, TaskUnmatched), (UnknownTables, TaskUnknownTables)],
)
def test_the_config_and_the_tasks_share_one_enum(config: type, task: type) -> None:
    # A plan pickles the member by its class's module: icesink.modes, which needs no pydantic.
    assert config is task
    assert config.__module__ == "icesink.modes"
