"""Cheaper tasks on PySpark's Python workers: pyarrow does not import pandas, imports from zips are
not re-scanned before each task, and what was imported is not traversed by the garbage collector
after each task."""

from __future__ import annotations

import gc
import sys
from typing import Any

# Tasks whose start freezes what is alive: a worker's first write leaves ~28,000 more long-lived
# objects (lazy imports and caches), which the second task's start freezes too.
_FREEZES = 2
_freezes = 0


class _UnchangingZip:
    """The import finder of a zip or jar on sys.path, whose archive does not change while the worker
    process lives: it finds what the zip importer finds, and has nothing to re-read."""

    def __init__(self, finder: Any) -> None:
        self.finder = finder

    def find_spec(self, fullname: str, target: object = None) -> Any:
        return self.finder.find_spec(fullname, target)

    def invalidate_caches(self) -> None:
        pass


class _NoPandas:
    """An import finder that has `import pandas` fail (placed first, for one call)."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname == "pandas":
            raise ModuleNotFoundError("pandas is not imported in icesink's tasks", name="pandas")


def arrow_without_pandas() -> None:
    """pyarrow's first conversion of a Python value (`pa.array([...])`) imports pandas, when it is
    installed (PySpark's driver side needs it), to recognise pandas objects: ~35 MB of a worker's
    ~320 and ~0.3 s of its start, for objects the tasks never make. Here that first conversion
    finds no pandas, which pyarrow then takes as not installed for the process: its conversions
    of lists, scalars and NumPy arrays are unchanged; one of a pandas object would be refused with
    an ImportError. Only in a process whose pyarrow has not looked for pandas yet; the tasks'
    functions run in `mapInArrow`, whose serializer is Arrow's alone."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(finder)


def in_a_worker() -> bool:
    """Whether this process is one of PySpark's Python workers: their main loop is pyspark.worker's,
    which the daemon (PySpark's, or icesink/worker_daemon.py running it) imports before it forks
    them (or which runs as `__main__` without a daemon); it unpickles the tasks' functions, so it
    is imported before them. Spark's environment variables for its workers depend on the transport
    (a secret over TCP, none over a Unix domain socket)."""
    main = getattr(sys.modules.get("__main__"), "__spec__", None)
    daemons = ("pyspark.daemon", "pyspark.worker", "icesink.worker_daemon")
    return "pyspark.worker" in sys.modules or getattr(main, "name", None) in daemons


def keep_zip_directories() -> None:
    """PySpark's workers may import pyspark from pyspark.zip (with spark-core's jar on sys.path: a
    Spark distribution's layout, which icesink/worker_daemon.py leaves as it is), and before every
    task call importlib.invalidate_caches(), which makes the zip importer of every
    package imported from a zip (pyspark, pyspark/sql, pyspark/sql/pandas, ...) re-read the
    archive's whole directory: 15-60 ms each, 0.3 s and more per task on a busy machine, for
    archives that do not change. Their finders are wrapped so the re-read is skipped; what is
    imported, and from where, is unchanged."""
    import sys
    import zipimport

    for path, finder in list(sys.path_importer_cache.items()):
        if isinstance(finder, zipimport.zipimporter):
            sys.path_importer_cache[path] = _UnchangingZip(finder)


def freeze_imports() -> None:
    """At the start of a worker process's first tasks: moves every object alive then (the modules
    the writer imported: pyarrow, polars, pyspark, ~90,000 objects) out of the garbage
    collector's reach. PySpark's daemon runs a full `gc.collect()` after every task of a reused
    worker, and traversing those objects took 42-44 ms of CPU per task (under 0.1 ms once frozen): a
    batch of 50 small tables runs ~100 tasks. Frozen objects are still freed by reference counting;
    only reference cycles among them that become garbage later are kept, and those are limited to
    the imports and the objects of a worker's first tasks."""
    global _freezes
    if _freezes < _FREEZES:
        gc.freeze()
        _freezes += 1
