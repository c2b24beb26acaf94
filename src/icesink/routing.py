"""Topic -> table routing. Pure: no Spark, no catalog.

Daily-rotated topics `<name>.<yyyymmdd>` (also `_` or `-` before the date) land in one table named
after `<name>`; characters a SQL identifier cannot carry become `_`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from icesink.errors import RoutingError

_DAILY = re.compile(r"^(?P<name>.+?)[._-](?P<date>\d{8})$")
_NOT_IDENT = re.compile(r"[^a-z0-9_]+")


@dataclass(frozen=True, order=True)
class TableRef:
    namespace: str
    name: str

    def qualified(self, catalog: str) -> str:
        """`catalog.namespace.name` as Spark and Iceberg's Spark3Util expect it."""
        return f"{catalog}.{self.namespace}.{self.name}"

    def __str__(self) -> str:
        return f"{self.namespace}.{self.name}"


def strip_daily_suffix(topic: str) -> str:
    """`events.20240102` -> `events`; a topic without a valid date suffix is returned unchanged."""
    m = _DAILY.match(topic)
    if not m:
        return topic
    try:
        datetime.strptime(m.group("date"), "%Y%m%d")
    except ValueError:
        return topic
    return m.group("name")


def table_name_for(topic: str) -> str:
    base = strip_daily_suffix(topic).lower()
    name = _NOT_IDENT.sub("_", base).strip("_")
    if not name:
        raise RoutingError(f"topic {topic!r} does not yield a usable table name")
    if name[0].isdigit():
        name = f"t_{name}"
    return name


def route(topic: str, namespace: str) -> TableRef:
    return TableRef(namespace, table_name_for(topic))
