"""The routing section: which topics (and, by a record field, which records) go to which tables."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from icesink.config.base import Identifier, Section
from icesink.modes import UnknownTables, Unmatched


class RouteRule(Section):
    """Topics matching `topics` go to `tables`, or by a record field to the tables it names."""

    topics: str = Field(description="Java/Python regex a topic must match in full; named groups feed the templates")
    tables: list[str] = Field(
        default_factory=list,
        description=(
            'target table templates, e.g. ["{table}", audit]; {group}, {topic} and {name} (the topic without '
            "its daily suffix); several = fan-out; default: group `table`, else {name}"
        ),
    )
    namespace: str | None = Field(
        None, description="namespace template; default: group `namespace`, else tables.namespace"
    )
    field: Identifier | None = Field(None, description="record field that routes each record (static or dynamic)")
    values: dict[str, list[str]] | None = Field(
        None, description="static routing: field value -> target table templates"
    )
    dynamic: bool = Field(False, description="dynamic routing: the field's value is the table name")
    unmatched: Unmatched = Field(
        Unmatched.DEAD_LETTER,
        description="a record whose field matches no value (static), or is not a valid table name (dynamic)",
    )
    unknown_tables: UnknownTables = Field(
        UnknownTables.CREATE, description="dynamic routing: a table that does not exist yet is created or dead-lettered"
    )

    @field_validator("topics")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"not a valid regular expression: {e}") from e
        return v

    @model_validator(mode="after")
    def _consistent(self) -> RouteRule:
        if (self.values is not None or self.dynamic) and self.field is None:
            raise ValueError("static (values) and dynamic routing need `field`")
        if self.values is not None and self.dynamic:
            raise ValueError("a rule routes by `values` or `dynamic`, not both")
        if self.field is not None and self.values is None and not self.dynamic:
            raise ValueError("`field` needs `values` (static routing) or `dynamic: true`")
        if self.tables and (self.values is not None or self.dynamic):
            raise ValueError("`tables` is for rules without a routing field")
        groups = set(re.compile(self.topics).groupindex) | {"topic", "name"}
        templates = [*self.tables, *(t for ts in (self.values or {}).values() for t in ts)]
        if self.namespace:
            templates.append(self.namespace)
        for t in templates:
            unknown = sorted(set(re.findall(r"{(\w*)}", t)) - groups)
            if unknown:
                raise ValueError(f"template {t!r} uses {unknown}, which are not named groups of {self.topics!r}")
        return self


class RoutingConfig(Section):
    rules: list[RouteRule] = Field(
        default_factory=list,
        description=(
            "the first rule whose `topics` matches a topic routes it; other topics go to the table named "
            "after the topic without its daily suffix"
        ),
    )
