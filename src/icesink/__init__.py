"""icesink: Kafka topics into Apache Iceberg v2 tables, exactly once per table."""

__version__ = "0.1.0"
