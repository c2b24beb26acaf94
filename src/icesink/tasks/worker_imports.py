"""Cheaper tasks on PySpark's Python workers: imports from zips are not re-scanned before each task,
and what was imported is not traversed by the garbage collector after each task."""

from __future__ import annotations

import gc
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


def keep_zip_directories() -> None:
    """PySpark's workers import pyspark from pyspark.zip (and have spark-core's jar on sys.path),
    and before every task call importlib.invalidate_caches(), which makes the zip importer of every
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
    the writer imported: pyarrow, pandas, pyspark, ~90,000 objects) out of the garbage
    collector's reach. PySpark's daemon runs a full `gc.collect()` after every task of a reused
    worker, and traversing those objects took 42-44 ms of CPU per task (under 0.1 ms once frozen): a
    batch of 50 small tables runs ~100 tasks. Frozen objects are still freed by reference counting;
    only reference cycles among them that become garbage later are kept, and those are limited to
    the imports and the objects of a worker's first tasks."""
    global _freezes
    if _freezes < _FREEZES:
        gc.freeze()
        _freezes += 1
