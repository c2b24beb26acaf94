"""Queries through the Trino of `dev/stack up --with-trino`, whose catalog `iceberg` is the stack's REST catalog."""

from __future__ import annotations

import os
from typing import Any

import requests
import trino

TRINO_URL = os.environ.get("ICESINK_TRINO_URL", "http://127.0.0.1:8088")
TRINO_USER = "icesink"
TRINO_CATALOG = "iceberg"


def trino_reachable(timeout: float = 5.0) -> bool:
    """True when Trino answers and has finished starting (catalogs loaded), as `dev/stack` waits for it."""
    try:
        response = requests.get(f"{TRINO_URL}/v1/info", timeout=timeout)
        return response.ok and response.json().get("starting") is False
    except (requests.RequestException, ValueError):
        return False


def trino_rows(sql: str) -> list[tuple[Any, ...]]:
    """All rows of one statement, as tuples of Python values (the client's mapping of Trino types)."""
    with trino.dbapi.Connection(host=TRINO_URL, user=TRINO_USER, catalog=TRINO_CATALOG, request_timeout=60) as conn:
        cursor = conn.cursor()
        try:
            cursor.execute(sql)
            return [tuple(row) for row in cursor.fetchall()]
        finally:
            cursor.close()
