"""What the tables hold, read without Spark: each table's offsets (from its newest offset-bearing
snapshot), its latest commit and its size, through PyIceberg and the REST catalog.

PyIceberg reads snapshot metadata and the dead-letter table (which has no deletes). Its one write
is a deliberate rewind's audit snapshot: no files added or removed, only lowered offsets and an
`icesink.rewind` record in the summary. Data and delete files are never committed with it.

Live rows with deletes applied are counted in `live_rows`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from icesink.config import Config
from icesink.errors import CatalogUnavailableError, IcesinkError, TableNotFoundError, TableReadError
from icesink.iceberg import snapshot_offsets as codec
from icesink.iceberg.live_count import count_live_rows
from icesink.iceberg.live_rows import UnsupportedFileError
from icesink.model import Offsets, TableRef

ROWS_FROM_SUMMARY = "total-records"  # no delete files: the snapshot summary's count is the live count
ROWS_DELETES_APPLIED = "deletes-applied"  # key columns of data and delete files read, deletes applied
ROWS_NOT_COUNTED = "not-counted"  # delete files present, deletes not applied (see the warning)


@dataclass(frozen=True)
class TableState:
    table: TableRef
    offsets: Offsets  # empty when no snapshot carries offsets
    offsets_snapshot_id: int | None
    offsets_committed_at: dt.datetime | None
    batch_id: int | None
    last_commit_at: dt.datetime | None
    rows: int | None  # live rows: total-records, or with delete files (and live=True) the deletes applied
    data_files: int
    delete_files: int
    equality_deletes: int
    total_records: int | None = None  # total-records of the current snapshot: data rows before deletes
    rows_counted: str = ROWS_FROM_SUMMARY  # how `rows` was counted
    rows_note: str | None = None  # why rows were not counted


def catalog_for(config: Config) -> Any:
    from pyiceberg.catalog import load_catalog

    access, secret = config.s3.resolved_keys()
    props: dict[str, str] = {"type": "rest", "uri": config.catalog.uri, "s3.region": config.s3.region}
    if config.catalog.warehouse:
        props["warehouse"] = config.catalog.warehouse
    if config.catalog.credential:
        props["credential"] = config.catalog.credential.get_secret_value()
    if config.s3.endpoint:
        props["s3.endpoint"] = config.s3.endpoint
    if config.s3.path_style_access:
        props["s3.force-virtual-addressing"] = "false"
    if access and secret:
        props["s3.access-key-id"] = access
        props["s3.secret-access-key"] = secret
    props.update(config.catalog.properties)
    try:
        return load_catalog(config.catalog.name, **props)
    except Exception as e:
        raise CatalogUnavailableError(f"cannot reach the Iceberg REST catalog at {config.catalog.uri}: {e}") from None


def _ancestry(table: Any) -> Iterator[Any]:
    """The current snapshot, then its parent, and so on."""
    snap = table.current_snapshot()
    while snap is not None:
        yield snap
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None


def _summary(snapshot: Any) -> dict[str, str]:
    return dict(snapshot.summary.additional_properties) if snapshot.summary else {}


def _when(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def state_of(ref: TableRef, table: Any, live: bool = False) -> TableState:
    """The table's offsets, last commit and size. `live=True` counts live rows: for a table with
    delete files that reads the key columns of its files (`count_live_rows`); a table without
    delete files has `total-records` live rows, no file is read."""
    current = table.current_snapshot()
    summary = _summary(current) if current is not None else {}
    found = codec.newest_offsets(_ancestry(table), _summary)
    total = int(summary.get("total-records", 0))
    rows: int | None = total
    counted = ROWS_FROM_SUMMARY
    note = None
    # Without the total (a writer may leave it out) the manifests say whether there are deletes.
    may_have_deletes = int(summary.get("total-delete-files", 1)) > 0
    if live and current is not None and may_have_deletes:
        try:
            rows, counted = count_live_rows(table), ROWS_DELETES_APPLIED
        except UnsupportedFileError as e:
            rows, counted, note = None, ROWS_NOT_COUNTED, str(e)
        except IcesinkError:
            raise
        except Exception as e:
            raise TableReadError(f"table {ref}: cannot count its live rows: {e}") from None
    return TableState(
        table=ref,
        offsets=found.offsets if found is not None else {},
        offsets_snapshot_id=found.snapshot.snapshot_id if found is not None else None,
        offsets_committed_at=_when(found.snapshot.timestamp_ms) if found is not None else None,
        batch_id=found.batch_id if found is not None else None,
        last_commit_at=_when(current.timestamp_ms) if current is not None else None,
        rows=rows,
        data_files=int(summary.get("total-data-files", 0)),
        delete_files=int(summary.get("total-delete-files", 0)),
        equality_deletes=int(summary.get("total-equality-deletes", 0)),
        total_records=total,
        rows_counted=counted,
        rows_note=note,
    )


def tables(
    catalog: Any, namespace: str, names: list[str] | None = None, missing_ok: bool = False
) -> list[tuple[TableRef, Any]]:
    """The namespace's tables (or the named ones), loaded; `missing_ok`: none when the namespace
    does not exist yet."""
    from pyiceberg.exceptions import NoSuchNamespaceError

    try:
        listed = [ident[-1] for ident in catalog.list_tables(namespace)]
    except NoSuchNamespaceError:
        if not missing_ok:
            raise TableNotFoundError(f"no namespace {namespace} in the catalog") from None
        listed = []
    except Exception as e:
        raise CatalogUnavailableError(f"cannot list the tables of namespace {namespace}: {e}") from None
    wanted = names or listed
    missing = sorted(set(wanted) - set(listed))
    if missing:
        raise TableNotFoundError(f"no table {', '.join(f'{namespace}.{m}' for m in missing)} in the catalog")
    return [(TableRef(namespace, n), catalog.load_table((namespace, n))) for n in sorted(wanted)]


def dead_letters_since(table: Any, since: dt.datetime) -> dict[str, int]:
    """Dead letters per target table written since `since`."""
    scan = table.scan(row_filter=f"failed_at >= '{since.isoformat()}'", selected_fields=("target_table",))
    counts: dict[str, int] = {}
    for target in scan.to_arrow().column("target_table").to_pylist():
        counts[target] = counts.get(target, 0) + 1
    return counts


REWIND_KEY = "icesink.rewind"
RESET_QUERY_ID = "icesink-offsets-reset"


def commit_rewind(table: Any, offsets: Offsets, audit: Mapping[str, Any]) -> int:
    """An empty snapshot whose summary lowers the table's offsets and says who asked, when, and
    from which offsets to which; returns its id."""
    props = codec.summary_properties(offsets, RESET_QUERY_ID, -1)
    props[REWIND_KEY] = json.dumps(dict(audit), sort_keys=True)
    with table.transaction() as tx, tx.update_snapshot(snapshot_properties=props).fast_append():
        pass
    table.refresh()
    return int(table.current_snapshot().snapshot_id)
