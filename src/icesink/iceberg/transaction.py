"""A batch committed to all of its tables in one catalog request: the REST catalog's multi-table
commit (`POST /v1/{prefix}/transactions/commit`, Iceberg's `RESTCatalog.commitTransaction`).

Each table's snapshot is made as commit.py makes it (its files, its offsets in the summary), but
into a transaction of its own that no request leaves: writing its manifests is all it costs. The
request then carries every table's change with the requirements Iceberg derives for it (the
table's uuid, and its main branch still at the snapshot the batch was planned on, whose offsets
were checked: the fence), and the catalog applies them all or refuses them all where it is
atomic.

Whatever goes wrong falls back to commit.py, table by table: a refused requirement (another
writer, or maintenance, committed meanwhile: the fenced path commits on top or refuses as it
does today), and an unknown outcome (the catalog's answer lost: each table's fence then finds
whether it holds the batch). Nothing here decides what a table holds; the tables say.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from icesink.errors import CommitError
from icesink.iceberg import ancestry
from icesink.iceberg import snapshot_offsets as codec
from icesink.iceberg.commit import CommitResult, pending_update
from icesink.iceberg.jvm import JavaObject, declared_field, jvm, table_identifier
from icesink.model import OffsetsPlan, WrittenFile, advance
from icesink.runtime import faults

log = logging.getLogger(__name__)

ENDPOINT = "POST /v1/{prefix}/transactions/commit"
_REFUSED = "org.apache.iceberg.exceptions.CommitFailedException"
# Answers that say the catalog does not take such a request at all (nothing of it applied): the
# job stops sending it.
_NEVER = frozenset(
    {
        "org.apache.iceberg.exceptions.BadRequestException",
        "org.apache.iceberg.exceptions.ForbiddenException",
        "org.apache.iceberg.exceptions.NotAuthorizedException",
        "java.lang.UnsupportedOperationException",
    }
)


@dataclass(frozen=True)
class TableFiles:
    """One table's share of a batch: its plan (offsets), the table as loaded, its files, its keys."""

    plan: OffsetsPlan
    table: JavaObject
    files: Sequence[WrittenFile]
    key_columns: Sequence[str] = ()


# Maps a function over the tables, several at once (each table's manifests are written apart).
Prepare = Callable[[Callable[[TableFiles], "JavaObject | None"], Sequence[TableFiles]], "list[JavaObject | None]"]


class MultiTableUnsupportedError(CommitError):
    """The catalog cannot take a multi-table commit (not a REST catalog, or it does not serve it)."""


def served_endpoints(catalog: JavaObject) -> set[str]:
    """The endpoints the REST catalog said it serves (its `/v1/config` answer, or Iceberg's
    defaults when it named none), as `"POST /v1/{prefix}/..."` strings. Raises
    MultiTableUnsupportedError for another kind of catalog, and when Iceberg's internals are not
    where this reads them (RESTCatalog.sessionCatalog, RESTSessionCatalog.endpoints)."""
    if str(catalog.getClass().getName()) != "org.apache.iceberg.rest.RESTCatalog":
        raise MultiTableUnsupportedError(f"the catalog is a {catalog.getClass().getName()}, not a REST catalog")
    try:
        session = _field(catalog, "org.apache.iceberg.rest.RESTCatalog", "sessionCatalog")
        endpoints = _field(session, "org.apache.iceberg.rest.RESTSessionCatalog", "endpoints")
    except Py4JJavaError as e:
        raise MultiTableUnsupportedError(
            f"this Iceberg release keeps the REST catalog's endpoints elsewhere ({e.java_exception}); "
            "set catalog.multi_table_commit: false"
        ) from e
    return {str(e) for e in endpoints}


def decided(catalog: JavaObject, wanted: bool) -> tuple[bool, str]:
    """Whether to commit a batch's tables in one request (`wanted`, and the catalog serves it),
    and how the job commits, in words for its log."""
    if not wanted:
        return False, "table by table (catalog.multi_table_commit: false)"
    try:
        served = served_endpoints(catalog)
    except MultiTableUnsupportedError as e:
        return False, f"table by table: {e}"
    if ENDPOINT not in served:
        return False, f"table by table: the catalog does not serve {ENDPOINT}"
    return True, f"a batch's tables in one catalog request ({ENDPOINT})"


def _field(obj: JavaObject, class_name: str, name: str) -> JavaObject:
    """The value of a private field declared by `class_name` (`obj`'s class or one it extends)."""
    field = declared_field(obj, class_name, name)
    if field is None:
        raise MultiTableUnsupportedError(f"{obj.getClass().getName()} is not a {class_name}")
    return field.get(obj)


def commit_together(
    spark: SparkSession, catalog: JavaObject, tables: Sequence[TableFiles], query_id: str, batch_id: int,
    prepare: Prepare,
) -> list[tuple[CommitResult, JavaObject]] | None:  # fmt: skip
    """Every table's snapshot of the batch in one catalog request, with the table's metadata as the
    request made it (kept_tables.py); None when the batch must be committed table by table
    instead (a table's offsets moved since planning, the catalog refused a requirement, or its
    answer was lost: see the module's docstring). Raises
    MultiTableUnsupportedError when the catalog answers that it does not take such a request
    (a 400, 401 or 403): nothing of it was applied."""

    def staged(t: TableFiles) -> JavaObject | None:
        return _staged(spark, t, query_id, batch_id)

    faults.maybe_pause("before-multi-table-staging", batch_id)
    started = time.monotonic()
    prepared = prepare(staged, tables)
    transactions = [txn for txn in prepared if txn is not None]
    if len(transactions) < len(tables):
        return None  # a table's offsets moved since planning: the fenced path says why, table by table
    TableCommit = jvm(spark).org.apache.iceberg.catalog.TableCommit  # noqa: N806
    commits = jvm(spark).java.util.ArrayList()
    for t, txn in zip(tables, transactions, strict=True):
        commits.add(
            TableCommit.create(table_identifier(spark, t.plan.table), txn.startMetadata(), txn.currentMetadata())
        )
    faults.maybe_kill("before-multi-table-commit", batch_id, spark)
    faults.maybe_pause("before-multi-table-commit", batch_id)
    sent = time.monotonic()
    try:
        catalog.commitTransaction(commits)
    except Py4JJavaError as e:
        # Table by table is right whatever happened (each table's fence settles it), so any
        # failure falls back; a failure that is not a refusal may have applied the request.
        failure = str(e.java_exception.getClass().getName())
        why = f"{failure.rsplit('.', 1)[-1]}: {str(e.java_exception.getMessage())[:300]}"
        if failure in _NEVER:
            raise MultiTableUnsupportedError(f"the catalog does not take the multi-table commit ({why})") from e
        if failure == _REFUSED:
            log.info("batch %d: the catalog refused the multi-table commit (%s); committing table by table",
                     batch_id, why)  # fmt: skip
        else:
            log.warning("batch %d: the multi-table commit's outcome is unknown (%s); each table says whether it "
                        "holds the batch, the others are committed table by table", batch_id, why)  # fmt: skip
        return None
    log.debug("batch %d: %d tables staged in %.2f s, committed in one request in %.2f s",
              batch_id, len(tables), sent - started, time.monotonic() - sent)  # fmt: skip
    faults.maybe_kill("after-multi-table-commit", batch_id, spark)
    TableMetadata = jvm(spark).org.apache.iceberg.TableMetadata  # noqa: N806
    # Without the changes the transaction recorded: a transaction begun on metadata that carries
    # them sends them again (the catalog refuses a snapshot it has: "Snapshot already exists").
    return [
        (_result(t, txn), TableMetadata.buildFrom(txn.currentMetadata()).discardChanges().build())
        for t, txn in zip(tables, transactions, strict=True)
    ]


def _staged(spark: SparkSession, t: TableFiles, query_id: str, batch_id: int) -> JavaObject | None:
    """The table's snapshot of the batch committed into a transaction of its own on the table as
    planned (its manifests written; no catalog request); None when its offsets moved since the
    batch was planned."""
    now = ancestry.committed_offsets(t.table)  # hidden behind a rewrite (no history served): moved
    if any(now.get(tp) != t.plan.committed.get(tp) for tp in t.plan.batch_tps):
        return None
    data = [f for f in t.files if f.content == "data"]
    deletes = [f for f in t.files if f.content == "deletes"]
    if deletes and not t.key_columns:
        raise CommitError(f"table {t.plan.table}: delete files without key columns")
    txn = _as_planned(spark, t.table)
    update = pending_update(spark, t.table, data, deletes, t.key_columns, into=txn)
    for k, v in codec.summary_properties(advance(now, t.plan.next_offsets), query_id, batch_id).items():
        update.set(k, v)
    # No validator (fence.OffsetsUnchanged): the transaction applies the update once, on the
    # metadata `now` was read from; the fence is the request's requirement that the table's main
    # branch is still at that snapshot (any commit since refuses the request, and the fenced path
    # then settles the table). No deleteWith (fence.KeepFiles): a transaction sets its own, which
    # only queues files for its own commit, which never runs here.
    update.commit()
    return txn


def _as_planned(spark: SparkSession, table: JavaObject) -> JavaObject:
    """A transaction of `table` on its metadata as loaded when the batch was planned, whose
    offsets were just checked. Not `table.newTransaction()`: it loads the table again (a request
    per table), and the request's requirement would then pin whatever was committed since the
    batch was planned - another job's commit of the same offsets among it, which the request
    would then commit the batch on top of. On the planned metadata, any commit since (another
    writer, maintenance) has the catalog refuse the request, and the fenced path settles each
    table. (The transaction's type, REPLACE_TABLE, only matters to its own commit, which never
    runs: the request carries its updates.)"""
    ops = table.operations()
    return jvm(spark).org.apache.iceberg.Transactions.replaceTableTransaction(table.name(), ops, ops.current())


def _result(t: TableFiles, txn: JavaObject) -> CommitResult:
    snapshot = txn.currentMetadata().currentSnapshot()
    parent = txn.startMetadata().currentSnapshot()
    data = [f for f in t.files if f.content == "data"]
    deletes = [f for f in t.files if f.content == "deletes"]
    return CommitResult(
        t.plan.table, int(snapshot.snapshotId()), files=len(data), records=sum(f.record_count for f in data),
        delete_files=len(deletes), deletes=sum(f.record_count for f in deletes),
        parent_id=int(parent.snapshotId()) if parent is not None else None, snapshot=snapshot,
    )  # fmt: skip
