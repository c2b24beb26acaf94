"""Trino (`dev/stack up --with-trino`) reads the REST catalog's Iceberg tables: one written with PyIceberg."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

from dev.kit.endpoints import CATALOG_URI, S3_ENDPOINT
from tests.support.trino import TRINO_URL, trino_reachable, trino_rows

pytestmark = pytest.mark.trino

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("happened_at", pa.timestamp("us", tz="UTC")),
        pa.field("event_date", pa.date32()),
        pa.field("ok", pa.bool_()),
    ]
)
ROWS = [
    (1, "alpha", Decimal("10.50"), datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC), date(2026, 1, 1), True),
    (2, "beta", Decimal("-3.25"), datetime(2026, 2, 28, 23, 59, 59, tzinfo=UTC), date(2026, 2, 28), False),
    (3, None, None, None, None, None),
]


def test_trino_reads_a_format_v2_table_written_through_the_rest_catalog(stack: None) -> None:
    if not trino_reachable():
        pytest.fail(f"Trino not reachable at {TRINO_URL}; run `dev/stack up --with-trino`", pytrace=False)
    catalog = load_catalog(
        "trino-test",
        type="rest",
        uri=CATALOG_URI,
        **{
            "s3.endpoint": S3_ENDPOINT,
            "s3.access-key-id": os.environ.get("AWS_ACCESS_KEY_ID", "icesink"),
            "s3.secret-access-key": os.environ.get("AWS_SECRET_ACCESS_KEY", "icesink-local-secret"),
            "s3.path-style-access": "true",
            "s3.region": "us-east-1",
        },
    )
    namespace = f"trino_{uuid.uuid4().hex[:8]}"
    identifier = (namespace, "events")
    catalog.create_namespace(namespace)
    try:
        table = catalog.create_table(identifier, schema=SCHEMA, properties={"format-version": "2"})
        table.append(pa.Table.from_pylist([dict(zip(SCHEMA.names, row, strict=True)) for row in ROWS], schema=SCHEMA))
        snapshot = table.current_snapshot()
        assert table.format_version == 2
        assert snapshot is not None

        rows = trino_rows(f'SELECT id, name, amount, happened_at, event_date, ok FROM "{namespace}".events ORDER BY id')
        assert rows == ROWS
        # The same table state, not a cached or older one: the snapshot PyIceberg committed, format v2.
        assert trino_rows(f'SELECT snapshot_id FROM "{namespace}"."events$snapshots"') == [(snapshot.snapshot_id,)]
        [(ddl,)] = trino_rows(f'SHOW CREATE TABLE "{namespace}".events')
        assert "format_version = 2" in ddl
    finally:
        if catalog.table_exists(identifier):
            catalog.drop_table(identifier)
        catalog.drop_namespace(namespace)
