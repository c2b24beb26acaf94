"""The job's one typed configuration: a YAML file, overridden by ICESINK__SECTION__KEY variables.

Loaded and validated once at start-up; every error names the key at fault. Secrets are
`SecretStr`, so printing the config (or an error about it) never shows them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from icesink.errors import ConfigError
from icesink.schema import partitioning

ENV_PREFIX = "ICESINK__"
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _plain_identifier(v: str) -> str:
    if not _IDENTIFIER.match(v):
        raise ValueError("must be a plain identifier")
    return v


# A name that becomes part of a table, column or catalog name: no dots, quotes or path tricks.
Identifier = Annotated[str, AfterValidator(_plain_identifier)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TriggerMode(StrEnum):
    AVAILABLE_NOW = "available-now"
    PROCESSING_TIME = "processing-time"


class TriggerConfig(_Section):
    mode: TriggerMode = Field(
        TriggerMode.PROCESSING_TIME,
        description="available-now drains what is there and stops; processing-time runs forever",
    )
    interval: str = Field("10 seconds", description="micro-batch interval of the processing-time trigger")


class JobConfig(_Section):
    name: str = Field("icesink", description="Spark application and streaming query name")
    checkpoint_location: str = Field(
        description="Spark checkpoint folder (local path or URI); the tables stay the source of truth"
    )
    trigger: TriggerConfig = Field(default_factory=TriggerConfig)
    retry_unreachable_for_s: int = Field(
        300,
        ge=0,
        description="how long a batch is run again while the catalog, S3, the registry or Kafka is "
        "unreachable (backing off up to 30 s) before the job fails; 0 fails at once",
    )

    @field_validator("checkpoint_location")
    @classmethod
    def _expand(cls, v: str) -> str:
        return os.path.expanduser(v) if "://" not in v else v


class KafkaConfig(_Section):
    bootstrap_servers: str = Field(description="Kafka bootstrap servers, host:port[,host:port]")
    subscribe_pattern: str = Field(
        description="Java regex of the topics to read (subscribePattern); anchor it with ^...$"
    )
    starting_offsets: str = Field(
        "earliest", description="earliest, latest or a JSON offsets spec, for a new checkpoint"
    )
    max_offsets_per_trigger: int | None = Field(None, ge=1, description="cap on records per micro-batch")
    fail_on_data_loss: bool = Field(True, description="fail when offsets were aged out or a topic was deleted")
    isolation_level: str = Field("read_committed", description="read_committed skips aborted transactions")
    metadata_max_age_ms: int = Field(
        30000, ge=1000, description="how often new topics matching the pattern are discovered"
    )
    consumer_group: str | None = Field(
        None,
        description=(
            "after each committed batch, commit its end offsets to this consumer group so Kafka's lag tools "
            "see the job (the tables stay the source of truth)"
        ),
    )
    options: dict[str, str] = Field(
        default_factory=dict,
        description="extra source options, e.g. kafka.security.protocol, kafka.sasl.jaas.config",
    )

    @field_validator("subscribe_pattern")
    @classmethod
    def _valid_regex(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"not a valid regular expression: {e}") from e
        return v

    @field_validator("options")
    @classmethod
    def _kafka_options(cls, v: dict[str, str]) -> dict[str, str]:
        reserved = {"subscribe", "subscribePattern", "assign", "kafka.bootstrap.servers"}
        bad = sorted(k for k in v if k in reserved)
        if bad:
            raise ValueError(f"set {', '.join(bad)} through the kafka section's own keys")
        return {k: str(x) for k, x in v.items()}


class CatalogConfig(_Section):
    name: Identifier = Field("icesink", description="Spark catalog name the tables are registered under")
    uri: str = Field(description="Iceberg REST catalog URI")
    warehouse: str | None = Field(None, description="warehouse location or name passed to the REST catalog")
    credential: SecretStr | None = Field(None, description="OAuth2 client credential for the catalog, if it needs one")
    properties: dict[str, str] = Field(default_factory=dict, description="extra Iceberg catalog properties")


class S3Config(_Section):
    endpoint: str | None = Field(None, description="S3 endpoint URL (MinIO, versitygw); unset for AWS")
    region: str = Field("us-east-1", description="S3 region")
    path_style_access: bool = Field(True, description="path-style bucket addressing (needed by MinIO)")
    access_key_id: SecretStr | None = Field(
        None, description="access key; default: AWS_ACCESS_KEY_ID from the environment"
    )
    secret_access_key: SecretStr | None = Field(
        None, description="secret key; default: AWS_SECRET_ACCESS_KEY from the environment"
    )

    def resolved_keys(self) -> tuple[str | None, str | None]:
        access = self.access_key_id.get_secret_value() if self.access_key_id else os.environ.get("AWS_ACCESS_KEY_ID")
        secret = (
            self.secret_access_key.get_secret_value()
            if self.secret_access_key
            else os.environ.get("AWS_SECRET_ACCESS_KEY")
        )
        return access, secret


class WriteMode(StrEnum):
    APPEND = "append"
    UPSERT = "upsert"
    CHANGELOG = "changelog"


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


class TableOptions(_Section):
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

    @property
    def is_cdc(self) -> bool:
        return self.mode is not WriteMode.APPEND


class TablesConfig(_Section):
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
            "columns per batch); batch orders changes within each batch only"
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
        if not all(_IDENTIFIER.match(p) for p in v.split(".")):
            raise ValueError("must be dot-separated identifiers")
        return v

    @model_validator(mode="after")
    def _partitions_within_keys(self) -> TablesConfig:
        checks = [("tables", self.settings_for(None))]
        checks += [(f"tables.per_table.{name}", self.settings_for(name)) for name in self.per_table]
        for where, s in checks:
            if s.is_cdc and s.key_columns:
                try:
                    partitioning.check_within_keys(s.partition_by, s.key_columns)
                except ValueError as e:
                    raise ValueError(f"{where}: {e}") from None
        return self

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
        )


class ValueFormat(StrEnum):
    JSON = "json"
    AVRO = "avro"


class KeyFormat(StrEnum):
    NONE = "none"
    STRING = "string"
    JSON = "json"
    AVRO = "avro"


class Envelope(StrEnum):
    NONE = "none"
    DEBEZIUM = "debezium"


class ErrorPolicy(StrEnum):
    DEAD_LETTER = "dead-letter"
    FAIL = "fail"


class RegistryConfig(_Section):
    url: str = Field(description="Schema Registry URL with the Confluent API (Apicurio: .../apis/ccompat/v7)")
    username: str | None = Field(None, description="basic-auth user")
    password: SecretStr | None = Field(None, description="basic-auth password")
    ca_location: str | None = Field(None, description="CA bundle for the registry's TLS certificate")
    certificate_location: str | None = Field(None, description="client certificate for mutual TLS")
    key_location: str | None = Field(None, description="client key for mutual TLS")
    timeout_s: float = Field(10.0, gt=0, description="per-request timeout")
    attempts: int = Field(5, ge=1, description="tries before a batch fails with the registry unreachable")


class DecodeConfig(_Section):
    format: ValueFormat = Field(
        ValueFormat.JSON,
        description="value format: json (Confluent-framed or plain) or avro (Confluent wire format)",
    )
    registry: RegistryConfig | None = Field(None, description="needed for avro")
    on_error: ErrorPolicy = Field(
        ErrorPolicy.DEAD_LETTER,
        description="a record that cannot be decoded: dead-letter it, or fail the batch",
    )
    dead_letter_table: Identifier = Field("dead_letters", description="dead-letter table, in tables.namespace")
    key_format: KeyFormat = Field(
        KeyFormat.NONE,
        description="none: keys go to dead letters only; string, json or avro (Confluent-framed): into key_column",
    )
    key_column: Identifier = Field("_key", description="column of the decoded key (a struct for json and avro)")
    envelope: Envelope = Field(
        Envelope.NONE, description="debezium: rows from after/before, op as the operation column"
    )
    operation_column: Identifier = Field(
        "_op",
        description="column of the operation (I/U/D): Debezium envelopes fill it, changelog tables read it",
    )
    source_columns: list[str] = Field(
        default_factory=list,
        description="Debezium source fields kept as _source_<name> columns, e.g. [ts_ms, lsn, db, table]",
    )


class Unmatched(StrEnum):
    DEAD_LETTER = "dead-letter"
    SKIP = "skip"


class UnknownTables(StrEnum):
    CREATE = "create"
    DEAD_LETTER = "dead-letter"


class RouteRule(_Section):
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


class RoutingConfig(_Section):
    rules: list[RouteRule] = Field(
        default_factory=list,
        description=(
            "the first rule whose `topics` matches a topic routes it; other topics go to the table named "
            "after the topic without its daily suffix"
        ),
    )


class SparkConfig(_Section):
    master: str | None = Field(None, description="Spark master when run as `icesink run` (spark-submit sets its own)")
    jars_dir: str | None = Field(
        None, description="folder of extra jars (scripts/stack jars); default: ICESINK_JARS_DIR"
    )
    conf: dict[str, str] = Field(default_factory=dict, description="extra Spark settings")


class Config(_Section):
    @model_validator(mode="after")
    def _avro_needs_registry(self) -> Config:
        avro = self.decode.format is ValueFormat.AVRO or self.decode.key_format is KeyFormat.AVRO
        if avro and self.decode.registry is None:
            raise ValueError("decode.registry is required when decode.format or decode.key_format is avro")
        return self

    job: JobConfig
    kafka: KafkaConfig
    catalog: CatalogConfig
    s3: S3Config = Field(default_factory=S3Config)
    tables: TablesConfig = Field(default_factory=TablesConfig)
    decode: DecodeConfig = Field(default_factory=DecodeConfig)
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)


def apply_env_overrides(raw: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Return `raw` with every ICESINK__A__B=value applied as raw["a"]["b"] = yaml(value)."""
    out: dict[str, Any] = {k: v for k, v in raw.items()}
    for name, value in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p]
        if not path:
            continue
        node = out
        for part in path[:-1]:
            child = node.get(part)
            child = dict(child) if isinstance(child, dict) else {}
            node[part] = child
            node = child
        try:
            node[path[-1]] = yaml.safe_load(value) if value != "" else ""
        except yaml.YAMLError:
            node[path[-1]] = value
    return out


def _describe(e: ValidationError, source: str) -> str:
    lines = [f"invalid configuration ({source}):"]
    for err in e.errors():
        key = ".".join(str(p) for p in err["loc"]) or "<root>"
        lines.append(f"  {key}: {err['msg']}")
    return "\n".join(lines)


def parse_config(raw: Any, source: str = "<dict>", environ: Mapping[str, str] | None = None) -> Config:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"invalid configuration ({source}): the top level must be a mapping")
    merged = apply_env_overrides(raw, os.environ if environ is None else environ)
    try:
        return Config.model_validate(merged)
    except ValidationError as e:
        raise ConfigError(_describe(e, source)) from None


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> Config:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config file {p}: {e.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {p} is not valid YAML: {e}") from None
    return parse_config(raw, str(p), environ)
