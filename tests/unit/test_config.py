from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icesink.config import TriggerMode, WriteMode, load_config, parse_config
from icesink.errors import ConfigError

MINIMAL: dict[str, Any] = {
    "job": {"checkpoint_location": "/tmp/cp"},
    "kafka": {"bootstrap_servers": "k:9092", "subscribe_pattern": "events[._-][0-9]{8}"},
    "catalog": {"uri": "http://c:8181"},
}


def test_minimal_config_gets_defaults() -> None:
    c = parse_config(MINIMAL, environ={})
    assert c.kafka.isolation_level == "read_committed"
    assert c.kafka.starting_offsets == "tables"
    assert c.kafka.starting_offsets_fallback.value == "earliest"
    assert c.job.trigger.mode is TriggerMode.PROCESSING_TIME
    assert c.catalog.name == "icesink"


def test_environment_overrides_nested_keys_with_yaml_values() -> None:
    env = {
        "ICESINK__KAFKA__MAX_OFFSETS_PER_TRIGGER": "5000",
        "ICESINK__JOB__TRIGGER__MODE": "available-now",
        "ICESINK__KAFKA__OPTIONS__kafka.security.protocol": "SASL_SSL",
        "OTHER": "ignored",
    }
    c = parse_config(MINIMAL, environ=env)
    assert c.kafka.max_offsets_per_trigger == 5000
    assert c.job.trigger.mode is TriggerMode.AVAILABLE_NOW
    assert c.kafka.options == {"kafka.security.protocol": "SASL_SSL"}


def test_errors_name_every_bad_key() -> None:
    raw = {**MINIMAL, "kafka": {"subscribe_pattern": "("}, "tables": {"namespace": "bad name", "colour": 1}}
    with pytest.raises(ConfigError) as e:
        parse_config(raw, source="job.yaml", environ={})
    text = str(e.value)
    assert "invalid configuration (job.yaml)" in text
    assert "kafka.bootstrap_servers: Field required" in text
    assert "kafka.subscribe_pattern: Value error, not a valid regular expression" in text
    assert "tables.namespace" in text
    assert "tables.colour: Extra inputs are not permitted" in text


def test_reserved_kafka_options_are_refused() -> None:
    raw = {**MINIMAL, "kafka": {**MINIMAL["kafka"], "options": {"subscribe": "x"}}}
    with pytest.raises(ConfigError, match=r"kafka\.options"):
        parse_config(raw, environ={})


def test_starting_offsets_are_tables_earliest_latest_or_a_spark_json_spec() -> None:
    for ok in ("tables", "earliest", "latest", '{"t": {"0": 42, "1": -2}}'):
        assert parse_config({**MINIMAL, "kafka": {**MINIMAL["kafka"], "starting_offsets": ok}}, environ={})
    for bad in ("from-tables", "[1, 2]", '{"t": 3}'):
        with pytest.raises(ConfigError, match=r"kafka\.starting_offsets.*tables, earliest, latest, or JSON"):
            parse_config({**MINIMAL, "kafka": {**MINIMAL["kafka"], "starting_offsets": bad}}, environ={})


def test_secrets_never_show_in_repr_or_errors() -> None:
    raw = {**MINIMAL, "s3": {"access_key_id": "AKIA-SECRET-1", "secret_access_key": "hunter2"}}
    c = parse_config(raw, environ={})
    assert "hunter2" not in repr(c)
    assert "AKIA-SECRET-1" not in repr(c)
    assert c.s3.resolved_keys() == ("AKIA-SECRET-1", "hunter2")
    bad = {**raw, "s3": {**raw["s3"], "region": 5}}
    with pytest.raises(ConfigError) as e:
        parse_config(bad, environ={})
    assert "hunter2" not in str(e.value)


def test_keys_default_to_the_aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    assert parse_config(MINIMAL, environ={}).s3.resolved_keys() == ("env-key", "env-secret")


def test_load_config_reports_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "nope.yaml", environ={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("job: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad, environ={})


def test_shipped_local_config_is_valid() -> None:
    c = load_config(Path(__file__).resolve().parents[2] / "conf" / "local.yaml", environ={})
    assert c.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert c.tables.namespace == "demo"


def test_table_settings_merge_per_table_over_the_defaults() -> None:
    raw = {
        **MINIMAL,
        "tables": {
            "mode": "upsert",
            "key_columns": ["id"],
            "properties": {"write.parquet.compression-codec": "zstd", "a": "1"},
            "per_table": {
                "orders": {
                    "mode": "changelog",
                    "key_columns": ["order_id", "region"],
                    "partition_by": ["bucket(8, order_id)", "region"],
                    "order_by": "_source_lsn",
                    "properties": {"a": "2"},
                }
            },
        },
    }
    t = parse_config(raw, environ={}).tables
    default = t.settings_for("customers")
    assert (default.mode, default.key_columns, default.partition_by) == (WriteMode.UPSERT, ("id",), ())
    orders = t.settings_for("orders")
    assert orders.mode is WriteMode.CHANGELOG
    assert orders.key_columns == ("order_id", "region")
    assert orders.partition_by == ("bucket(8, order_id)", "region")
    assert orders.order_by == "_source_lsn"
    assert orders.properties == {"write.parquet.compression-codec": "zstd", "a": "2"}
    assert orders.is_cdc
    assert not parse_config(MINIMAL, environ={}).tables.settings_for("x").is_cdc


def test_a_cdc_table_partitioned_outside_its_key_is_refused_at_start_up() -> None:
    raw = {
        **MINIMAL,
        "tables": {"per_table": {"orders": {"mode": "upsert", "key_columns": ["id"], "partition_by": ["days(ts)"]}}},
    }
    with pytest.raises(ConfigError) as e:
        parse_config(raw, environ={})
    msg = str(e.value)
    assert "tables.per_table.orders" in msg
    assert "day(ts) use column(s) ['ts'] that are not key columns ['id']" in msg
    # Append-only tables may partition by anything.
    raw["tables"]["per_table"]["orders"]["mode"] = "append"
    assert parse_config(raw, environ={}).tables.settings_for("orders").partition_by == ("days(ts)",)


def test_bad_partition_fields_are_named() -> None:
    raw = {**MINIMAL, "tables": {"partition_by": ["bucket(id)"]}}
    with pytest.raises(ConfigError, match=r"tables.partition_by.*bucket\(N, column\)"):
        parse_config(raw, environ={})
