"""Key resolution of upsert/changelog tables (pure)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from icesink.batch.changes import resolve_keys
from icesink.errors import ConfigError

ROW = StructType(
    [
        StructField("id", LongType()),
        StructField("region", StringType()),
        StructField("score", DoubleType()),
        StructField("meta", StructType([StructField("a", IntegerType())])),
        StructField("_key", StructType([StructField("id", LongType())])),
    ]
)
KEY = StructType([StructField("id", LongType())])


def test_configured_keys_win() -> None:
    assert resolve_keys("ns.t", ["region", "id"], ["id"], KEY, "_key", ROW) == ("region", "id")


def test_then_the_tables_identifier_fields_then_the_record_key() -> None:
    assert resolve_keys("ns.t", [], ["region"], KEY, "_key", ROW) == ("region",)
    assert resolve_keys("ns.t", [], [], KEY, "_key", ROW) == ("id",)
    string_key_row = StructType([*ROW.fields[:2], StructField("_k", StringType())])
    assert resolve_keys("ns.t", [], [], StringType(), "_k", string_key_row) == ("_k",)


def test_no_key_anywhere_is_a_config_error_naming_the_table() -> None:
    with pytest.raises(ConfigError, match=r"table ns.t: .*tables.key_columns.*decode.key_format"):
        resolve_keys("ns.t", [], [], None, "_key", ROW)


def test_keys_must_be_columns_of_a_fitting_type() -> None:
    with pytest.raises(ConfigError, match=r"table ns.t: key column\(s\) \['nope'\]"):
        resolve_keys("ns.t", ["nope"], [], None, "_key", ROW)
    with pytest.raises(ConfigError, match="key column score is a floating-point type"):
        resolve_keys("ns.t", ["score"], [], None, "_key", ROW)
    with pytest.raises(ConfigError, match="key column meta is a nested type"):
        resolve_keys("ns.t", ["meta"], [], None, "_key", ROW)
