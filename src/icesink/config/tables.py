"""The tables section: how records become rows of a table (write mode, keys, partitioning, order,
evolution), for all tables and per table, and the settings one table resolves to."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, Field, field_validator, model_validator

from icesink.config.base import IDENTIFIER, Identifier, Section
from icesink.modes import WriteMode
from icesink.schema import partitioning


def _partition_fields(v: list[str] | None) -> list[str] | None:
    if v is None:
        return None
    for text in v:
        partitioning.parse_partition_field(text)  # raises ValueError naming the bad entry
    return v


PartitionBy = Annotated[list[str] | None, AfterValidator(_partition_fields)]


def _separator(v: str | None) -> str | None:
    if v is not None and not re.fullmatch(r"[A-Za-z0-9_]{1,3}", v):
        raise ValueError("must be 1 to 3 letters, digits or underscores (it becomes part of column names)")
    return v


Separator = Annotated[str | None, AfterValidator(_separator)]


class IncompatiblePolicy(StrEnum):
    FAIL = "fail"
    DEAD_LETTER = "dead-letter"


class OrderScope(StrEnum):
    TABLE = "table"
    BATCH = "batch"


class TableOptions(Section):
    """One table's settings; what is unset falls back to the tables section's."""

    mode: WriteMode | None = Field(default=None, description="see tables.mode")
    key_columns: list[Identifier] | None = Field(default=None, description="see tables.key_columns")
    partition_by: PartitionBy = Field(default=None, description="see tables.partition_by")
    order_by: Identifier | None = Field(default=None, description="see tables.order_by")
    order_by_scope: OrderScope | None = Field(default=None, description="see tables.order_by_scope")
    properties: dict[str, str] | None = Field(default=None, description="merged over tables.properties")
    sort_by: list[Identifier] | None = Field(default=None, description="see tables.sort_by")
    on_incompatible: IncompatiblePolicy | None = Field(default=None, description="see tables.on_incompatible")
    case_insensitive: bool | None = Field(default=None, description="see tables.case_insensitive")
    flatten_separator: Separator = Field(default=None, description="see tables.flatten_separator")
    maintain: bool | None = Field(
        default=None, description="whether the job maintains this table (default: by maintenance.tables)"
    )


@dataclass(frozen=True)
class TableSettings:
    """The resolved settings of one table."""

    mode: WriteMode
    key_columns: tuple[str, ...]
    partition_by: tuple[str, ...]
    order_by: str | None
    properties: Mapping[str, str]
    order_by_scope: OrderScope = OrderScope.TABLE
    sort_by: tuple[str, ...] = ()
    on_incompatible: IncompatiblePolicy = IncompatiblePolicy.DEAD_LETTER
    case_insensitive: bool = False
    flatten_separator: str | None = None
    maintain: bool | None = None  # None: as maintenance.tables says for its mode

    @property
    def is_cdc(self) -> bool:
        return self.mode is not WriteMode.APPEND


class TablesConfig(Section):
    namespace: str = Field("default", description="namespace of the tables (created if missing)")
    properties: dict[str, str] = Field(default_factory=dict, description="table properties set when a table is created")
    target_file_size_bytes: int = Field(
        128 * 1024 * 1024, ge=1024 * 1024, description="roll data files at about this size"
    )
    mode: WriteMode = Field(
        WriteMode.APPEND,
        description=(
            "append: every record is a new row; upsert: every record replaces the row with its key, a "
            "tombstone deletes it; changelog: the operation column (I/U/D, Debezium's op) says which"
        ),
    )
    key_columns: list[Identifier] = Field(
        default_factory=list,
        description=(
            "key of upsert/changelog tables; default: the table's identifier fields, else the record key's fields"
        ),
    )
    partition_by: PartitionBy = Field(
        default_factory=list,
        description='partition spec of new tables, e.g. ["bucket(16, id)", "days(ts)"]; CDC tables: key columns only',
    )
    order_by: Identifier | None = Field(
        None,
        description=(
            "column ordering one key's changes (e.g. _source_lsn), in a batch and, with order_by_scope "
            "table, against the row the table holds; default: Kafka offset order within a batch"
        ),
    )
    order_by_scope: OrderScope = Field(
        OrderScope.TABLE,
        description=(
            "with order_by: table skips a change older than the row the table already holds for its key "
            "(redelivered changes never move a row back; costs a read of the table's key and order_by "
            "columns for a batch with a change below the greatest order_by value the table holds); batch "
            "orders changes within each batch only"
        ),
    )
    sort_by: list[Identifier] = Field(
        default_factory=list, description="sort order of new tables (ascending columns), e.g. [event_time, id]"
    )
    on_incompatible: IncompatiblePolicy = Field(
        IncompatiblePolicy.DEAD_LETTER,
        description=(
            "a field whose type cannot be promoted to its column's (string -> int, a narrowing): dead-letter the "
            "records, or fail the batch naming table, column and both types"
        ),
    )
    case_insensitive: bool = Field(False, description="match record fields to columns ignoring case (UserId = userid)")
    flatten_separator: Separator = Field(
        None, description="flatten nested structs into top-level columns joined by this, e.g. _ (a.b -> a_b)"
    )
    per_table: dict[Identifier, TableOptions] = Field(
        default_factory=dict, description="settings of single tables by table name, over the ones above"
    )

    @field_validator("namespace")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not all(IDENTIFIER.match(p) for p in v.split(".")):
            raise ValueError("must be dot-separated identifiers")
        return v

    @model_validator(mode="after")
    def _partitions_within_keys(self) -> TablesConfig:
        for where, s in self.sections():
            if s.is_cdc and s.key_columns:
                try:
                    partitioning.check_within_keys(s.partition_by, s.key_columns)
                except ValueError as e:
                    raise ValueError(f"{where}: {e}") from None
        return self

    def sections(self) -> list[tuple[str, TableSettings]]:
        """The settings of every table the section can name, by where they are set: the section's
        own (every table not in per_table), then each of per_table's."""
        return [("tables", self.settings_for(None))] + [
            (f"tables.per_table.{name}", self.settings_for(name)) for name in self.per_table
        ]

    def settings_for(self, table: str | None) -> TableSettings:
        o = self.per_table.get(table) if table is not None else None
        o = o or TableOptions()

        def pick(mine: Any, default: Any) -> Any:
            return default if mine is None else mine

        return TableSettings(
            mode=pick(o.mode, self.mode),
            key_columns=tuple(pick(o.key_columns, self.key_columns)),
            partition_by=tuple(pick(o.partition_by, self.partition_by) or ()),
            order_by=pick(o.order_by, self.order_by),
            order_by_scope=pick(o.order_by_scope, self.order_by_scope),
            properties={**self.properties, **(o.properties or {})},
            sort_by=tuple(pick(o.sort_by, self.sort_by)),
            on_incompatible=pick(o.on_incompatible, self.on_incompatible),
            case_insensitive=pick(o.case_insensitive, self.case_insensitive),
            flatten_separator=pick(o.flatten_separator, self.flatten_separator),
            maintain=o.maintain,
        )
