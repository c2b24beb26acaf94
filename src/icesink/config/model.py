"""The job's one typed configuration, `Config`, and its sections other than tables (`config.tables`)
and routing (`config.routing`): the job, Kafka, the catalog, S3, decoding and Spark.

Loaded and validated once at start-up (`config.load`); every error names the key at fault. Secrets
are `SecretStr`, so printing the config (or an error about it) never shows them.
"""

from __future__ import annotations

import json
import os
import re
from enum import StrEnum

from pydantic import Field, SecretStr, field_validator, model_validator

from icesink.config.base import Identifier, Section
from icesink.config.maintenance import MaintenanceConfig
from icesink.config.routing import RoutingConfig
from icesink.config.tables import TablesConfig


class TriggerMode(StrEnum):
    AVAILABLE_NOW = "available-now"
    PROCESSING_TIME = "processing-time"


class TriggerConfig(Section):
    mode: TriggerMode = Field(
        TriggerMode.PROCESSING_TIME,
        description="available-now drains what is there and stops; processing-time runs forever",
    )
    interval: str = Field("10 seconds", description="micro-batch interval of the processing-time trigger")


class JobConfig(Section):
    name: str = Field("icesink", description="Spark application and streaming query name")
    checkpoint_location: str = Field(
        description="Spark checkpoint folder: a local path, or s3a://bucket/path on the tables' S3 (the s3 "
        "section's settings); the tables stay the source of truth"
    )
    trigger: TriggerConfig = Field(default_factory=TriggerConfig)
    table_parallelism: int = Field(
        8,
        ge=1,
        description="how many tables of a batch are loaded, written and committed at once (driver threads, each "
        "table's Spark job in its own FAIR pool); 1: one after another",
    )
    retry_unreachable_for_s: int = Field(
        300,
        ge=0,
        description="how long a batch is run again while the catalog, S3, the registry or Kafka is "
        "unreachable (backing off up to 30 s) before the job fails; 0 fails at once",
    )
    warm_up: bool = Field(
        True,
        description="while the first batch is planned, start the Python workers with their imports (~1.5 s "
        "each on 2 cores) in a Spark job of their own, and run Iceberg's commit path once in the driver's "
        "JVM on a throwaway in-memory table (its S3 client, ~3 s of first use): the first batch waits for "
        "neither; false: the first batch pays both",
    )

    @field_validator("checkpoint_location")
    @classmethod
    def _expand(cls, v: str) -> str:
        return os.path.expanduser(v) if "://" not in v else v


class StartingFallback(StrEnum):
    EARLIEST = "earliest"
    LATEST = "latest"


class KafkaConfig(Section):
    bootstrap_servers: str = Field(description="Kafka bootstrap servers, host:port[,host:port]")
    subscribe_pattern: str = Field(
        description="Java regex of the topics to read (subscribePattern); anchor it with ^...$"
    )
    starting_offsets: str = Field(
        "tables",
        description="where a new checkpoint starts: tables (each partition at the offsets the tables hold, "
        "so a lost checkpoint re-reads nothing), earliest, latest, or a Spark JSON offsets spec",
    )
    starting_offsets_fallback: StartingFallback = Field(
        StartingFallback.EARLIEST,
        description="with starting_offsets: tables, where partitions that no table holds start (earliest or latest)",
    )
    max_offsets_per_trigger: int | None = Field(
        None,
        ge=1,
        description=(
            "cap on records per micro-batch; unset: none for a job of append tables, else 250,000 per core"
            " of the Spark session (the changes the one-pass tasks hold: a larger batch of changes would go"
            " Spark's slower way)"
        ),
    )
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
    direct_read: bool = Field(
        True,
        description="the one-pass job (decode.direct_json, decode.direct_avro) reads its records with librdkafka in "
        "its Python tasks, not through Spark's Kafka source; used when librdkafka takes the kafka.* options (else, or "
        "with false, Spark's source)",
    )
    options: dict[str, str] = Field(
        default_factory=dict,
        description="extra source options, e.g. kafka.security.protocol, kafka.sasl.jaas.config; they win over "
        "icesink's defaults (kafka.fetch.max.wait.ms 10: each task reads a known range of records already in the log)",
    )

    @field_validator("subscribe_pattern")
    @classmethod
    def _valid_regex(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"not a valid regular expression: {e}") from e
        return v

    @field_validator("starting_offsets")
    @classmethod
    def _starting(cls, v: str) -> str:
        if v in ("tables", "earliest", "latest"):
            return v
        try:
            spec = json.loads(v)
        except ValueError:
            spec = None
        if not isinstance(spec, dict) or not all(isinstance(p, dict) for p in spec.values()):
            raise ValueError('tables, earliest, latest, or JSON such as {"topic": {"0": 42}}')
        return v

    @field_validator("options")
    @classmethod
    def _kafka_options(cls, v: dict[str, str]) -> dict[str, str]:
        reserved = {"subscribe", "subscribePattern", "assign", "kafka.bootstrap.servers"}
        bad = sorted(k for k in v if k in reserved)
        if bad:
            raise ValueError(f"set {', '.join(bad)} through the kafka section's own keys")
        return {k: str(x) for k, x in v.items()}


class CatalogConfig(Section):
    name: Identifier = Field("icesink", description="Spark catalog name the tables are registered under")
    uri: str = Field(description="Iceberg REST catalog URI")
    warehouse: str | None = Field(None, description="warehouse location or name passed to the REST catalog")
    credential: SecretStr | None = Field(None, description="OAuth2 client credential for the catalog, if it needs one")
    properties: dict[str, str] = Field(default_factory=dict, description="extra Iceberg catalog properties")
    multi_table_commit: bool = Field(
        True,
        description="commit a batch's tables in one request where the REST catalog serves POST "
        "/v1/{prefix}/transactions/commit (all or none where the catalog applies it atomically); false: one "
        "commit per table",
    )
    keep_tables_s: float = Field(
        30.0,
        ge=0,
        description="plan a table's next batch on the table as the catalog last served it (its load, creation or "
        "commit's answer) for this long instead of loading it each batch; a table another writer moved meanwhile "
        "is refused at commit as always; 0: load every table every batch",
    )


class S3Config(Section):
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


class RegistryConfig(Section):
    url: str = Field(description="Schema Registry URL with the Confluent API (Apicurio: .../apis/ccompat/v7)")
    username: str | None = Field(None, description="basic-auth user")
    password: SecretStr | None = Field(None, description="basic-auth password")
    ca_location: str | None = Field(None, description="CA bundle for the registry's TLS certificate")
    certificate_location: str | None = Field(None, description="client certificate for mutual TLS")
    key_location: str | None = Field(None, description="client key for mutual TLS")
    timeout_s: float = Field(10.0, gt=0, description="per-request timeout")
    attempts: int = Field(5, ge=1, description="tries before a batch fails with the registry unreachable")


class DecodeConfig(Section):
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
    direct_json: bool = Field(
        True,
        description="plain JSON (Debezium envelopes and JSON record keys too) into "
        "append, changelog or upsert tables of simple columns (flattened or case-insensitive ones too), and Kafka "
        "Connect JSON "
        "(schemas on; Debezium envelopes too) into tables its schemas' rows fit, partitioned or not (new "
        "tables: the columns of the batch's first records, checked on every record): decoded and written in one "
        "Spark job for all such tables, each key's last change chosen in the task that reads its topic-partition "
        "(docs/performance.md); false: always through Spark's JSON decoder",
    )
    direct_avro: bool = Field(
        True,
        description="Avro records of simple types, enums, Debezium's semantic types, nested records, arrays and "
        "maps, or Debezium envelopes of them, with string or Avro record keys, into append, changelog or upsert "
        "tables with those columns (flattened or case-insensitive ones too), partitioned or not: decoded in Python "
        "and written in one Spark job, each key's last "
        "change chosen in the task that reads its topic-partition (docs/performance.md); false: always through "
        "Spark's from_avro",
    )


class SparkConfig(Section):
    master: str | None = Field(None, description="Spark master when run as `icesink run` (spark-submit sets its own)")
    jars_dir: str | None = Field(None, description="folder of extra jars (dev/stack jars); default: ICESINK_JARS_DIR")
    conf: dict[str, str] = Field(default_factory=dict, description="extra Spark settings")


class Config(Section):
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
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
