"""Faster task starts on PySpark's Python workers: imports from zips are not re-scanned per task."""

from __future__ import annotations

from typing import Any


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
