"""Topic -> table routing. Pure: no Spark, no catalog.

Daily-rotated topics `<name>.<yyyymmdd>` (also `_` or `-` before the date) land in one table named
after `<name>`; characters a SQL identifier cannot carry become `_`. Rules (config `routing.rules`)
override this: regular expressions with named groups for namespace and table, fan-out to several
tables, and routing each record by a field (static values, or the field naming the table).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from icesink.errors import RoutingError
from icesink.model import TableRef
from icesink.modes import UnknownTables, Unmatched

if TYPE_CHECKING:
    from icesink.config import RouteRule

_DAILY = re.compile(r"^(?P<name>.+?)[._-](?P<date>\d{8})$")
_NOT_IDENT = re.compile(r"[^a-z0-9_]+")


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


# A dynamic table name is a record's value: only a plain identifier, never a path, a dotted name
# (another namespace) or quoting that could reach another catalog object.
_SAFE_TABLE = re.compile(r"^[a-z_][a-z0-9_]{0,127}$")
_SAFE_NAMESPACE = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$")


def dynamic_table(value: str | None) -> str | None:
    """The table a dynamic-routing field names, or None when the value is not a safe name."""
    if value is None:
        return None
    name = value.strip().lower()
    return name if _SAFE_TABLE.match(name) else None


@dataclass(frozen=True)
class Route:
    """Where one topic's records go: to fixed tables, or per record by a field."""

    tables: tuple[TableRef, ...] = ()
    field: str | None = None
    values: tuple[tuple[str, tuple[TableRef, ...]], ...] = ()  # static routing
    dynamic_namespace: str | None = None  # dynamic routing
    unmatched: Unmatched = Unmatched.DEAD_LETTER
    unknown_tables: UnknownTables = UnknownTables.CREATE

    @property
    def dynamic(self) -> bool:
        return self.dynamic_namespace is not None

    def static_targets(self, value: str | None) -> tuple[TableRef, ...]:
        return dict(self.values).get(value, ()) if value is not None else ()

    def targets(self, value: str, reserved: TableRef) -> tuple[TableRef, ...] | tuple[str, str]:
        """The tables the field's value routes a record to, or why none takes it: (error class,
        message). Whether a dynamic table exists (`unknown_tables`) is the caller's to ask."""
        if not self.dynamic:
            refs = self.static_targets(value)
            return refs if refs else ("Unrouted", f"field {self.field} = {value!r} matches none of the rule's values")
        name = dynamic_table(value)
        assert self.dynamic_namespace is not None
        if name is None:
            return ("InvalidTableName", f"field {self.field} = {value!r} is not a valid table name")
        ref = TableRef(self.dynamic_namespace, name)
        if ref == reserved:
            return ("InvalidTableName", f"field {self.field} names the dead-letter table {ref}")
        return (ref,)

    @property
    def no_value(self) -> tuple[str, str]:
        """Why a record without the field's value goes to no table."""
        return ("Unrouted", f"no value in field {self.field}")


class Router:
    """Topic -> Route by the config's rules (the first match wins); pure and cached."""

    def __init__(self, rules: Sequence[RouteRule], namespace: str) -> None:
        self._rules = [(re.compile(r.topics), r) for r in rules]
        self._namespace = namespace
        self._cache: dict[str, Route] = {}

    def route(self, topic: str) -> Route:
        if topic not in self._cache:
            self._cache[topic] = self._route(topic)
        return self._cache[topic]

    def _route(self, topic: str) -> Route:
        for i, (regex, rule) in enumerate(self._rules):
            m = regex.fullmatch(topic)
            if m is None:
                continue
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            names = {**groups, "topic": topic, "name": strip_daily_suffix(topic)}
            where = f"topic {topic} (routing rule {i + 1}, {rule.topics!r})"
            ns_template = rule.namespace or ("{namespace}" if "namespace" in groups else None)
            namespace = _render(ns_template, names, where, _SAFE_NAMESPACE) if ns_template else self._namespace
            if rule.dynamic:
                assert rule.field is not None
                return Route(
                    field=rule.field,
                    dynamic_namespace=namespace,
                    unmatched=rule.unmatched,
                    unknown_tables=rule.unknown_tables,
                )
            if rule.values is not None:
                values = tuple(
                    (value, tuple(TableRef(namespace, _render(t, names, where, _SAFE_TABLE)) for t in templates))
                    for value, templates in rule.values.items()
                )
                return Route(field=rule.field, values=values, unmatched=rule.unmatched)
            templates = rule.tables or (["{table}"] if "table" in groups else [])
            if not templates:
                return Route(tables=(TableRef(namespace, table_name_for(topic)),))
            return Route(tables=tuple(TableRef(namespace, _render(t, names, where, _SAFE_TABLE)) for t in templates))
        return Route(tables=(route(topic, self._namespace),))


def _render(template: str, names: dict[str, str], where: str, pattern: re.Pattern[str]) -> str:
    value = template.format_map(names).lower()
    if not pattern.match(value):
        raise RoutingError(f"{where}: {template!r} gives {value!r}, which is not a valid name")
    return value
