"""PySpark's daemon for icesink's Python workers (`spark.python.daemon.module`, job/session.py): the
process on each executor that forks the workers. It is pyspark.daemon, run after one change to
`sys.path`, and imports nothing else: what it imports, every worker it forks inherits.

Spark puts `$SPARK_HOME/python/lib/pyspark.zip`, py4j's zip and spark-core's jar first on the
workers' PYTHONPATH. A zip holds no bytecode, so the daemon and then each worker it forks compiled
every PySpark module they imported from its source, at every executor's start: 0.7-0.8 s of a core
for a daemon's and a worker's imports on this project's machine, 0.2 s from the installed
package's cached bytecode (docs/performance.md). Where PySpark is an installed package and
SPARK_HOME is that package (pip's layout: the local stack, the Docker image), the archives under
SPARK_HOME hold copies of what is installed, and are dropped from `sys.path`. Anywhere else (a
Spark distribution whose PySpark is only in its zip) `sys.path` is left as Spark made it.

Kept out of `icesink.tasks`, whose package imports pyarrow, which must not start its threads
before the fork.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Sequence


def archives_to_drop(
    path: Sequence[str], spark_home: str | None, origin_without: Callable[[list[str], str], str | None]
) -> list[str]:
    """The entries of `path` to drop: the zips and jars under `spark_home`, when without them
    `pyspark` is imported from `spark_home` itself and `py4j` is found; else none.
    `origin_without(kept, name)` is where module `name` would be imported from with `kept` as
    the path (None: nowhere)."""
    if not spark_home:
        return []
    home = os.path.join(os.path.abspath(spark_home), "")
    archives = [p for p in path if p.endswith((".zip", ".jar")) and os.path.abspath(p).startswith(home)]
    if not archives:
        return []
    kept = [p for p in path if p not in archives]
    # Resolved both sides: PySpark's launcher gives SPARK_HOME resolved, sys.path may name a link.
    found = origin_without(kept, "pyspark")
    if found is None or os.path.realpath(found) != os.path.realpath(os.path.join(home, "__init__.py")):
        return []  # PySpark is only in its zip, or another PySpark is installed: Spark's path stays
    return archives if origin_without(kept, "py4j") is not None else []


def _origin_without(kept: list[str], name: str) -> str | None:
    saved = sys.path[:]
    sys.path[:] = kept
    try:
        spec = importlib.util.find_spec(name)
    finally:
        sys.path[:] = saved
    return None if spec is None or spec.origin is None else os.path.abspath(spec.origin)


def main() -> None:
    dropped = archives_to_drop(sys.path, os.environ.get("SPARK_HOME"), _origin_without)
    sys.path[:] = [p for p in sys.path if p not in dropped]
    for p in dropped:
        # Importing this module made their zip importers; PySpark's workers call every cached
        # importer's invalidate_caches() before each task, which re-reads a zip's directory.
        sys.path_importer_cache.pop(p, None)
    from pyspark import daemon

    daemon.manager()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
