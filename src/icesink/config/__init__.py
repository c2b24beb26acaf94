"""The job's one typed config, validated at start-up.

base.py     the section base and Identifier
model.py    Config and the job, kafka, catalog, s3, decode and spark sections
tables.py   the tables section and one table's resolved settings
routing.py  the routing rules
maintenance.py  the table maintenance the job runs after its commits
load.py     YAML file + ICESINK__SECTION__KEY overrides -> Config
reference.py  the README's config reference, generated from the model
(the choices the Python tasks use too, write modes and unmatched records: icesink/modes.py)
"""

from icesink.config.base import Identifier
from icesink.config.load import ENV_PREFIX, apply_env_overrides, load_config, parse_config
from icesink.config.maintenance import MaintainedTables, MaintenanceConfig
from icesink.config.model import (
    CatalogConfig,
    Config,
    DecodeConfig,
    Envelope,
    ErrorPolicy,
    JobConfig,
    KafkaConfig,
    KeyFormat,
    RegistryConfig,
    S3Config,
    SparkConfig,
    StartingFallback,
    TriggerConfig,
    TriggerMode,
    ValueFormat,
)
from icesink.config.routing import RouteRule, RoutingConfig
from icesink.config.tables import (
    IncompatiblePolicy,
    OrderScope,
    PartitionBy,
    Separator,
    TableOptions,
    TablesConfig,
    TableSettings,
)
from icesink.modes import UnknownTables, Unmatched, WriteMode

__all__ = [
    "ENV_PREFIX",
    "CatalogConfig",
    "Config",
    "DecodeConfig",
    "Envelope",
    "ErrorPolicy",
    "Identifier",
    "IncompatiblePolicy",
    "JobConfig",
    "KafkaConfig",
    "KeyFormat",
    "MaintainedTables",
    "MaintenanceConfig",
    "OrderScope",
    "PartitionBy",
    "RegistryConfig",
    "RouteRule",
    "RoutingConfig",
    "S3Config",
    "Separator",
    "SparkConfig",
    "StartingFallback",
    "TableOptions",
    "TableSettings",
    "TablesConfig",
    "TriggerConfig",
    "TriggerMode",
    "UnknownTables",
    "Unmatched",
    "ValueFormat",
    "WriteMode",
    "apply_env_overrides",
    "load_config",
    "parse_config",
]
