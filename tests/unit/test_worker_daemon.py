"""icesink/worker_daemon.archives_to_drop: which of Spark's archives leave the workers' sys.path
(tests/spark/test_worker_imports.py checks the workers themselves)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyspark

from icesink.worker_daemon import archives_to_drop

HOME = "/venv/site-packages/pyspark"
ZIPS = [f"{HOME}/python/lib/pyspark.zip", f"{HOME}/python/lib/py4j-0.10.9.9-src.zip", f"{HOME}/jars/spark-core.jar"]
OTHERS = ["/work/job.zip", "/usr/lib/python311.zip", "/venv/site-packages"]


def _found(pyspark_at: str | None, py4j: bool = True) -> Callable[[list[str], str], str | None]:
    def origin_without(kept: list[str], name: str) -> str | None:
        assert not set(ZIPS) & set(kept), "asked with Spark's archives still on the path"
        if name == "pyspark":
            return pyspark_at
        return "/venv/site-packages/py4j/__init__.py" if py4j else None

    return origin_without


def test_pips_layout_drops_the_archives_under_spark_home_only() -> None:
    path = [ZIPS[0], ZIPS[1], ZIPS[2], *OTHERS]
    assert archives_to_drop(path, HOME, _found(f"{HOME}/__init__.py")) == ZIPS
    assert archives_to_drop(path, HOME + "/", _found(f"{HOME}/__init__.py")) == ZIPS


def test_a_spark_distribution_keeps_its_path() -> None:
    # PySpark only in the distribution's zip.
    dist = "/opt/spark"
    path = [f"{dist}/python/lib/pyspark.zip", f"{dist}/python/lib/py4j-0.10.9.9-src.zip", *OTHERS]
    assert archives_to_drop(path, dist, _found(None)) == []
    # Another PySpark installed beside it (maybe another version): the distribution's stays first.
    assert archives_to_drop(path, dist, _found("/venv/site-packages/pyspark/__init__.py")) == []


def test_nothing_is_dropped_without_py4j_elsewhere_or_without_spark_home() -> None:
    path = [*ZIPS, *OTHERS]
    assert archives_to_drop(path, HOME, _found(f"{HOME}/__init__.py", py4j=False)) == []
    assert archives_to_drop(path, None, _found(f"{HOME}/__init__.py")) == []
    assert archives_to_drop(OTHERS, HOME, _found(f"{HOME}/__init__.py")) == []


def test_this_environments_pyspark_is_pips_layout() -> None:
    """The venv's own PySpark, with the workers' path as Spark lays it out, in a process that has
    not imported PySpark (where it has, find_spec answers from sys.modules, whatever the path)."""
    home = Path(pyspark.__file__).parent
    archives = sorted(str(p) for p in home.glob("python/lib/*.zip"))
    assert any(p.endswith("pyspark.zip") for p in archives)
    probe = (
        "import sys; from icesink.worker_daemon import _origin_without, archives_to_drop; "
        "print(archives_to_drop(sys.path, sys.argv[1], _origin_without))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*archives, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", probe, str(home)], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(archives)
