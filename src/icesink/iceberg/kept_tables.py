"""Tables the job keeps from one batch to the next instead of loading them again from the catalog.

A batch of 200 tables loaded each of them first (a request each, in which the catalog reads and
serves the table's whole metadata), only to find the snapshot the job itself committed a batch
before. A table is kept for `catalog.keep_tables_s` after the job last heard of it from the
catalog: its load, its creation, or the answer to its commit (each the table as the catalog holds
it then). A table committed in one multi-table request is kept as the request made it (its
metadata as staged, the batch's snapshot current), its age still that of its load or creation:
that answer carries no metadata.

Nothing here can add or lose a record. A table kept while another writer moved it is a table that
moved after the batch was planned, as when it moves during a batch: the multi-table request's
requirement (the table's main branch still at the planned snapshot) refuses it, and the commit's
fence (fence.py) refuses offsets that moved or commits on top of a compaction. What a kept table
can miss for a while is what commits no snapshot: another client's schema or property change.

Iceberg's REST client gives no way to put a table's metadata after a multi-table commit
(RESTTableOperations keeps it in a private field); it is set through reflection, checked, and a
release where that field is gone makes the job load such tables each batch (said once).
"""

from __future__ import annotations

import logging
import threading
import time

from py4j.protocol import Py4JError

from icesink.iceberg.jvm import JavaObject, declared_field
from icesink.model import TableRef

log = logging.getLogger(__name__)

_REST_OPS = "org.apache.iceberg.rest.RESTTableOperations"


class KeptTables:
    """The tables (Java `Table`s) the job may plan its next batch on without loading them."""

    def __init__(self, keep_s: float) -> None:
        self._keep_s = keep_s
        self._tables: dict[TableRef, tuple[JavaObject, float]] = {}  # the table, when the catalog said it
        self._lock = threading.Lock()  # the per-table steps and the maintenance thread share it
        self._settable = True  # whether RESTTableOperations' metadata can be set (said once if not)
        # That field, opened once (finding it is four py4j calls; Java's Field.set refuses an
        # object of another class, which then reads as a release where it cannot be set).
        self._current: JavaObject | None = None

    def get(self, ref: TableRef) -> JavaObject | None:
        """The table as kept, when the catalog said it less than `keep_s` ago."""
        with self._lock:
            kept = self._tables.get(ref)
            if kept is None:
                return None
            if time.monotonic() - kept[1] >= self._keep_s:
                del self._tables[ref]
                return None
            return kept[0]

    def heard(self, ref: TableRef, table: JavaObject) -> None:
        """The table as the catalog just served it: loaded, created, or the answer to its commit."""
        if self._keep_s > 0:
            with self._lock:
                self._tables[ref] = (table, time.monotonic())

    def committed_together(self, ref: TableRef, table: JavaObject, metadata: JavaObject, snapshot_id: int) -> None:
        """`table` committed in a multi-table request as `metadata` (the transaction's, holding
        `snapshot_id`): kept so, with the age of its load or creation; forgotten when that cannot be
        set."""
        with self._lock:
            kept = self._tables.get(ref)
            if kept is None or kept[0] is not table:
                self._tables.pop(ref, None)
                return
            if not self._settable or not self._as_committed(table, metadata, snapshot_id):
                del self._tables[ref]

    @staticmethod
    def set_on(table: JavaObject) -> bool:
        """Whether `table` holds metadata a multi-table request made (set here: it has no file)."""
        return table.operations().current().metadataFileLocation() is None

    def forget(self, ref: TableRef) -> None:
        """Loaded again at the next batch (another commit of the job's own, such as maintenance)."""
        with self._lock:
            self._tables.pop(ref, None)

    def forget_all(self) -> None:
        """Every table loaded again (a batch failed: what it committed is read from the tables)."""
        with self._lock:
            self._tables.clear()

    def _as_committed(self, table: JavaObject, metadata: JavaObject, snapshot_id: int) -> bool:
        ops = table.operations()
        try:
            field = self._current
            if field is None:
                field = self._current = declared_field(ops, _REST_OPS, "current")
                if field is None:
                    return False  # not a REST catalog's table: loaded each batch, as before
            field.set(ops, metadata)
            current = table.currentSnapshot()
            if current is not None and int(current.snapshotId()) == snapshot_id:
                return True
            problem = "the table did not read back as set"
        except Py4JError as e:
            problem = str(e).splitlines()[0]
        self._settable = False
        log.warning(
            "tables committed in one request are loaded again each batch: this Iceberg release keeps a "
            "REST table's metadata elsewhere (%s)", problem,
        )  # fmt: skip
        return False
