"""Kafka Connect JsonConverter schemas into parse and column types (pure: no Column is built)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from icesink.schema.connect import DECIMAL, ConnectSchemaError, is_connect_schema, node, parse_schema

# A Debezium PostgreSQL change event's value schema as Connect's JsonConverter writes it
# (trimmed from a real connector's output: fewer columns and source fields, same shape).
VALUE_SCHEMA = """
{"type": "struct", "optional": false, "name": "probe.public.customers.Envelope", "version": 2, "fields": [
  {"type": "struct", "optional": true, "name": "probe.public.customers.Value", "field": "before", "fields": [
    {"type": "int32", "optional": false, "default": 0, "field": "id"},
    {"type": "string", "optional": true, "field": "name"},
    {"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
     "parameters": {"scale": "2", "connect.decimal.precision": "12"}, "field": "balance"},
    {"type": "struct", "optional": true, "name": "io.debezium.data.VariableScaleDecimal", "version": 1,
     "doc": "Variable scaled decimal", "field": "amount", "fields": [
       {"type": "int32", "optional": false, "field": "scale"},
       {"type": "bytes", "optional": false, "field": "value"}]},
    {"type": "string", "optional": true, "name": "io.debezium.time.ZonedTimestamp", "version": 1,
     "field": "created_at"},
    {"type": "int64", "optional": true, "name": "io.debezium.time.MicroTimestamp", "version": 1, "field": "local_ts"},
    {"type": "int32", "optional": true, "name": "io.debezium.time.Date", "version": 1, "field": "birthday"},
    {"type": "string", "optional": true, "name": "io.debezium.data.Json", "version": 1, "field": "doc"},
    {"type": "string", "optional": true, "name": "io.debezium.data.Uuid", "version": 1, "field": "uid"},
    {"type": "int16", "optional": true, "field": "small"},
    {"type": "int64", "optional": true, "field": "big"},
    {"type": "double", "optional": true, "field": "ratio"},
    {"type": "bytes", "optional": true, "field": "raw"}]},
  {"type": "struct", "optional": true, "name": "probe.public.customers.Value", "field": "after", "fields": [
    {"type": "int32", "optional": false, "default": 0, "field": "id"},
    {"type": "string", "optional": true, "field": "name"},
    {"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
     "parameters": {"scale": "2", "connect.decimal.precision": "12"}, "field": "balance"},
    {"type": "struct", "optional": true, "name": "io.debezium.data.VariableScaleDecimal", "version": 1,
     "doc": "Variable scaled decimal", "field": "amount", "fields": [
       {"type": "int32", "optional": false, "field": "scale"},
       {"type": "bytes", "optional": false, "field": "value"}]},
    {"type": "string", "optional": true, "name": "io.debezium.time.ZonedTimestamp", "version": 1,
     "field": "created_at"},
    {"type": "int64", "optional": true, "name": "io.debezium.time.MicroTimestamp", "version": 1, "field": "local_ts"},
    {"type": "int32", "optional": true, "name": "io.debezium.time.Date", "version": 1, "field": "birthday"},
    {"type": "string", "optional": true, "name": "io.debezium.data.Json", "version": 1, "field": "doc"},
    {"type": "string", "optional": true, "name": "io.debezium.data.Uuid", "version": 1, "field": "uid"},
    {"type": "int16", "optional": true, "field": "small"},
    {"type": "int64", "optional": true, "field": "big"},
    {"type": "double", "optional": true, "field": "ratio"},
    {"type": "bytes", "optional": true, "field": "raw"}]},
  {"type": "struct", "optional": false, "name": "io.debezium.connector.postgresql.Source", "version": 1,
   "field": "source", "fields": [
    {"type": "string", "optional": false, "field": "version"},
    {"type": "string", "optional": false, "field": "connector"},
    {"type": "string", "optional": false, "field": "name"},
    {"type": "int64", "optional": false, "field": "ts_ms"},
    {"type": "string", "optional": true, "name": "io.debezium.data.Enum", "version": 1,
     "parameters": {"allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},
     "default": "false", "field": "snapshot"},
    {"type": "string", "optional": false, "field": "db"},
    {"type": "string", "optional": false, "field": "schema"},
    {"type": "string", "optional": false, "field": "table"},
    {"type": "int64", "optional": true, "field": "txId"},
    {"type": "int64", "optional": true, "field": "lsn"}]},
  {"type": "string", "optional": false, "field": "op"},
  {"type": "int64", "optional": true, "field": "ts_ms"}]}
"""
# JsonConverter names FLOAT64 "double" and FLOAT32 "float" (its JsonSchema.DOUBLE_TYPE_NAME and
# FLOAT_TYPE_NAME), as in `ratio` above.

IMAGE_COLUMNS = [
    ("id", "int"),
    ("name", "string"),
    ("balance", "decimal(12,2)"),
    ("amount", "decimal(38,18)"),
    ("created_at", "timestamp"),
    ("local_ts", "timestamp_ntz"),
    ("birthday", "date"),
    ("doc", "string"),
    ("uid", "string"),
    ("small", "int"),
    ("big", "bigint"),
    ("ratio", "double"),
    ("raw", "binary"),
]
IMAGE_PARSE = [
    ("id", "int"),
    ("name", "string"),
    ("balance", "binary"),
    ("amount", "struct<scale:int,value:binary>"),
    ("created_at", "string"),
    ("local_ts", "bigint"),
    ("birthday", "int"),
    ("doc", "string"),
    ("uid", "string"),
    ("small", "int"),
    ("big", "bigint"),
    ("ratio", "double"),
    ("raw", "binary"),
]
SOURCE_TYPE = (
    "struct<version:string,connector:string,name:string,ts_ms:bigint,snapshot:string,db:string,"
    "schema:string,table:string,txId:bigint,lsn:bigint>"
)


def columns(t: DataType) -> list[tuple[str, str]]:
    assert isinstance(t, StructType)
    return [(f.name, f.dataType.simpleString()) for f in t.fields]


def not_null_anywhere(t: DataType, path: str = "") -> list[str]:
    """Paths of the fields, elements and map values in `t` that are not nullable."""
    out: list[str] = []
    if isinstance(t, StructType):
        for f in t.fields:
            out += [] if f.nullable else [f"{path}.{f.name}"]
            out += not_null_anywhere(f.dataType, f"{path}.{f.name}")
    elif isinstance(t, ArrayType):
        out += [] if t.containsNull else [f"{path}[]"]
        out += not_null_anywhere(t.elementType, f"{path}[]")
    elif isinstance(t, MapType):
        out += [] if t.valueContainsNull else [f"{path}{{}}"]
        out += not_null_anywhere(t.valueType, f"{path}{{}}")
    return out


def field(name: str, schema: dict[str, Any]) -> str:
    """A one-field struct schema's text, the field being `schema`."""
    return json.dumps({"type": "struct", "optional": False, "fields": [dict(schema, field=name)]})


def decimal(**parameters: Any) -> dict[str, Any]:
    return {"type": "bytes", "optional": True, "name": DECIMAL, "version": 1, "parameters": parameters}


# ---------------------------------------------------------------- a Debezium change event


def test_debezium_value_schema_decides_the_column_types() -> None:
    schema = parse_schema(VALUE_SCHEMA)
    result = schema.result_type
    assert [f.name for f in result.fields] == ["before", "after", "source", "op", "ts_ms"]
    assert columns(result["before"].dataType) == IMAGE_COLUMNS
    assert columns(result["after"].dataType) == IMAGE_COLUMNS
    assert result["source"].dataType.simpleString() == SOURCE_TYPE
    assert (result["op"].dataType.simpleString(), result["ts_ms"].dataType.simpleString()) == ("string", "bigint")
    assert schema.text == VALUE_SCHEMA


def test_debezium_value_schema_parses_the_payload_as_connect_writes_it() -> None:
    parse = parse_schema(VALUE_SCHEMA).parse_type
    assert columns(parse["before"].dataType) == IMAGE_PARSE
    assert columns(parse["after"].dataType) == IMAGE_PARSE
    assert parse["source"].dataType.simpleString() == SOURCE_TYPE  # nothing in `source` converts


def test_every_column_is_nullable_even_required_ones() -> None:
    # A delete's `before` image holds only the key; required source fields are nullable too.
    schema = parse_schema(VALUE_SCHEMA)
    assert not_null_anywhere(schema.result_type) == []
    assert not_null_anywhere(schema.parse_type) == []


def test_the_schema_knows_its_logical_names_and_what_converts() -> None:
    schema = parse_schema(VALUE_SCHEMA)
    assert schema.names == {
        "probe.public.customers.Envelope",
        "probe.public.customers.Value",
        DECIMAL,
        "io.debezium.data.VariableScaleDecimal",
        "io.debezium.time.ZonedTimestamp",
        "io.debezium.time.MicroTimestamp",
        "io.debezium.time.Date",
        "io.debezium.data.Json",
        "io.debezium.data.Uuid",
        "io.debezium.connector.postgresql.Source",
        "io.debezium.data.Enum",
    }
    parts = dict(schema.root.fields)
    assert schema.root.converts
    assert schema.root.checked  # decimals and zoned timestamps
    assert (parts["after"].converts, parts["after"].checked) == (True, True)
    assert (parts["source"].converts, parts["source"].checked) == (False, False)
    assert (parts["op"].converts, parts["op"].checked) == (False, False)
    image = dict(parts["after"].fields)
    assert image["id"].default == 0
    assert image["id"].converts
    assert not image["id"].checked
    assert (image["balance"].checked, image["amount"].checked, image["created_at"].checked) == (True, True, True)
    assert not image["local_ts"].checked
    assert not image["birthday"].checked
    assert (image["doc"].converts, image["uid"].converts, image["raw"].converts) == (False, False, False)


def test_jsonconverter_names_floats_float_and_double() -> None:
    schema = parse_schema(VALUE_SCHEMA)  # the schema exactly as Debezium's connector wrote it
    assert dict(columns(schema.result_type["after"].dataType))["ratio"] == "double"
    assert node({"type": "float", "optional": True}).result.simpleString() == "float"
    assert node({"type": "double", "optional": True}).result.simpleString() == "double"


# ---------------------------------------------------------------- primitives and logical types


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("int8", "int"),
        ("int16", "int"),
        ("int32", "int"),
        ("int64", "bigint"),
        ("float32", "float"),
        ("float64", "double"),
        ("boolean", "boolean"),
        ("string", "string"),
        ("bytes", "binary"),
    ],
)
def test_primitives(kind: str, expected: str) -> None:
    n = node({"type": kind, "optional": True})
    assert (n.parse.simpleString(), n.result.simpleString()) == (expected, expected)
    assert not n.converts
    assert not n.checked


@pytest.mark.parametrize(
    ("name", "kind", "parse", "result", "checked"),
    [
        ("org.apache.kafka.connect.data.Date", "int32", "int", "date", False),
        ("org.apache.kafka.connect.data.Time", "int32", "int", "bigint", False),
        ("org.apache.kafka.connect.data.Timestamp", "int64", "bigint", "timestamp", False),
        ("io.debezium.time.Date", "int32", "int", "date", False),
        ("io.debezium.time.Time", "int32", "int", "bigint", False),
        ("io.debezium.time.MicroTime", "int64", "bigint", "bigint", False),
        ("io.debezium.time.NanoTime", "int64", "bigint", "bigint", False),
        ("io.debezium.time.Timestamp", "int64", "bigint", "timestamp_ntz", False),
        ("io.debezium.time.MicroTimestamp", "int64", "bigint", "timestamp_ntz", False),
        ("io.debezium.time.NanoTimestamp", "int64", "bigint", "timestamp_ntz", False),
        ("io.debezium.time.ZonedTimestamp", "string", "string", "timestamp", True),
    ],
)
def test_time_logical_types(name: str, kind: str, parse: str, result: str, checked: bool) -> None:
    n = node({"type": kind, "optional": True, "name": name, "version": 1})
    assert (n.parse.simpleString(), n.result.simpleString()) == (parse, result)
    assert n.converts
    assert n.checked is checked
    assert n.name == name


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        ("io.debezium.data.Json", "string", "string"),
        ("io.debezium.data.Uuid", "string", "string"),
        ("io.debezium.data.Xml", "string", "string"),
        ("io.debezium.data.Enum", "string", "string"),
        ("io.debezium.time.ZonedTime", "string", "string"),
        ("io.debezium.data.Bits", "bytes", "binary"),
    ],
)
def test_other_debezium_names_keep_their_connect_type(name: str, kind: str, expected: str) -> None:
    n = node({"type": kind, "optional": True, "name": name})
    assert (n.parse.simpleString(), n.result.simpleString()) == (expected, expected)
    assert not n.converts


def test_a_struct_of_primitives_converts_nothing() -> None:
    n = node(
        {
            "type": "struct",
            "optional": True,
            "fields": [
                {"type": "int64", "optional": True, "field": "a"},
                {"type": "string", "optional": False, "field": "b"},
                {"type": "struct", "optional": True, "field": "c", "fields": [{"type": "boolean", "field": "d"}]},
            ],
        }
    )
    assert n.result.simpleString() == "struct<a:bigint,b:string,c:struct<d:boolean>>"
    assert n.parse == n.result
    assert not n.converts
    assert not n.checked


def test_a_required_field_with_a_default_converts_and_one_deep_inside_too() -> None:
    required = {"type": "int32", "optional": False, "default": 7}
    assert node(required).converts
    assert not node(required).checked
    nested = node(
        {
            "type": "struct",
            "fields": [{"type": "struct", "field": "inner", "fields": [dict(required, field="n")]}],
        }
    )
    assert nested.converts
    assert not nested.checked


# ---------------------------------------------------------------- decimals


def test_decimal_takes_scale_and_precision_from_its_parameters() -> None:
    n = node(decimal(scale="2", **{"connect.decimal.precision": "12"}))
    assert (n.parse.simpleString(), n.result.simpleString()) == ("binary", "decimal(12,2)")
    assert n.converts
    assert n.checked
    assert n.name == DECIMAL


def test_decimal_without_a_precision_is_decimal_38() -> None:
    assert node(decimal(scale="3")).result.simpleString() == "decimal(38,3)"
    assert node(decimal(scale="0")).result.simpleString() == "decimal(38,0)"


def test_decimal_precision_below_the_scale_is_raised_to_it_and_capped_at_38() -> None:
    assert node(decimal(scale="5", **{"connect.decimal.precision": "2"})).result.simpleString() == "decimal(5,5)"
    assert node(decimal(scale="2", **{"connect.decimal.precision": "65"})).result.simpleString() == "decimal(38,2)"
    assert node(decimal(scale="38")).result.simpleString() == "decimal(38,38)"


def test_decimals_in_arrays_and_string_keyed_maps() -> None:
    arr = node({"type": "array", "optional": True, "items": decimal(scale="1")})
    assert (arr.parse.simpleString(), arr.result.simpleString()) == ("array<binary>", "array<decimal(38,1)>")
    assert arr.converts
    assert arr.checked
    m = node(
        {
            "type": "map",
            "optional": True,
            "keys": {"type": "string", "optional": False},
            "values": decimal(scale="2", **{"connect.decimal.precision": "10"}),
        }
    )
    assert (m.parse.simpleString(), m.result.simpleString()) == ("map<string,binary>", "map<string,decimal(10,2)>")
    assert m.converts
    assert m.checked
    schema = parse_schema(field("prices", {"type": "array", "optional": True, "items": decimal(scale="1")}))
    assert columns(schema.result_type) == [("prices", "array<decimal(38,1)>")]
    assert not_null_anywhere(schema.result_type) == []
    assert DECIMAL in schema.names


def test_arrays_and_maps_of_primitives_convert_nothing() -> None:
    arr = node({"type": "array", "items": {"type": "string", "optional": False}})
    assert arr.result.simpleString() == "array<string>"
    assert not arr.converts
    assert not arr.checked
    m = node({"type": "map", "keys": {"type": "string"}, "values": {"type": "int64", "optional": True}})
    assert m.result.simpleString() == "map<string,bigint>"
    assert not m.converts
    assert not m.checked


# ---------------------------------------------------------------- defaults


@pytest.mark.parametrize(
    ("schema", "default"),
    [
        ({"type": "int32", "optional": False, "default": 0}, 0),
        ({"type": "int32", "default": 5}, 5),  # Connect fields are required unless they say optional
        ({"type": "boolean", "optional": False, "default": False}, False),
        ({"type": "string", "optional": False, "default": "n/a"}, "n/a"),
        ({"type": "float64", "optional": False, "default": 1.5}, 1.5),
        ({"type": "int32", "optional": True, "default": 0}, None),  # optional: null stays null
        ({"type": "int32", "optional": False}, None),
        ({"type": "int32", "optional": False, "default": None}, None),
        ({"type": "bytes", "optional": False, "default": "AAE="}, None),  # base64 text is no binary literal
        ({"type": "string", "optional": False, "name": "io.debezium.data.Enum", "default": "false"}, None),
        ({"type": "int32", "optional": False, "name": "io.debezium.time.Date", "default": 0}, None),
        ({"type": "bytes", "optional": False, "name": DECIMAL, "parameters": {"scale": "2"}, "default": "AA=="}, None),
    ],
)
def test_only_a_required_plain_field_takes_its_default(schema: dict[str, Any], default: Any) -> None:
    n = node(schema)
    assert n.default == default
    assert type(n.default) is type(default)


def test_a_default_makes_the_field_convert_even_when_it_is_falsy() -> None:
    assert node({"type": "int32", "optional": False, "default": 0}).converts
    assert node({"type": "boolean", "optional": False, "default": False}).converts
    assert not node({"type": "int32", "optional": True, "default": 0}).converts


def test_structs_arrays_and_maps_take_no_default() -> None:
    struct = node(
        {"type": "struct", "optional": False, "default": {"a": 1}, "fields": [{"type": "int32", "field": "a"}]}
    )
    assert struct.default is None
    arr = node({"type": "array", "optional": False, "default": [1], "items": {"type": "int32"}})
    assert arr.default is None
    assert not arr.converts


# ---------------------------------------------------------------- errors


def test_a_map_with_non_string_keys_has_no_column_type() -> None:
    int_keys = {"type": "map", "optional": True, "keys": {"type": "int32"}, "values": {"type": "string"}}
    with pytest.raises(ConnectSchemaError, match="map with non-string keys at tags"):
        parse_schema(field("tags", int_keys))
    with pytest.raises(ConnectSchemaError, match="map with non-string keys"):
        node(int_keys)
    with pytest.raises(ConnectSchemaError, match="map with non-string keys"):
        node({"type": "map", "values": {"type": "string"}})


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"scale": "-2"}, r"negative scale \(-2\)"),
        ({"scale": "39"}, "scale 39 does not fit"),
        ({}, "without an integer `scale`"),
        ({"connect.decimal.precision": "10"}, "without an integer `scale`"),
        ({"scale": "two"}, "without an integer `scale`"),
        ({"scale": "2", "connect.decimal.precision": "x"}, "without an integer `scale`"),
    ],
)
def test_decimals_without_an_iceberg_type(parameters: dict[str, str], message: str) -> None:
    with pytest.raises(ConnectSchemaError, match=message):
        node(decimal(**parameters))


def test_a_decimal_without_parameters_at_all() -> None:
    with pytest.raises(ConnectSchemaError, match="without an integer `scale`"):
        node({"type": "bytes", "name": DECIMAL})


def test_unknown_types_name_their_path() -> None:
    with pytest.raises(ConnectSchemaError, match=r"unknown Connect type 'uint32'$"):
        node({"type": "uint32"})
    nested = {"type": "struct", "fields": [{"type": "array", "field": "xs", "items": {"type": "int128"}}]}
    with pytest.raises(ConnectSchemaError, match=r"unknown Connect type 'int128' at after\.xs\[\]"):
        parse_schema(field("after", nested))
    with pytest.raises(ConnectSchemaError, match="not a Connect schema at a"):
        parse_schema(field("a", {"optional": True}))  # no type at all
    with pytest.raises(ConnectSchemaError, match="struct field without a name"):
        node({"type": "struct", "fields": [{"type": "int32"}]})


def test_the_top_level_must_be_a_struct() -> None:
    with pytest.raises(ConnectSchemaError, match="top-level schema is string, not a struct"):
        parse_schema('{"type": "string"}')
    with pytest.raises(ConnectSchemaError, match="top-level schema is array, not a struct"):
        parse_schema('{"type": "array", "items": {"type": "string"}}')
    with pytest.raises(ConnectSchemaError, match="not a Connect schema"):
        parse_schema("[1, 2]")
    with pytest.raises(ConnectSchemaError, match="not a Connect schema"):
        parse_schema('"struct"')


def test_the_schema_must_be_json() -> None:
    with pytest.raises(ConnectSchemaError, match="not valid JSON"):
        parse_schema('{"type": "struct", "fields": [')
    with pytest.raises(ConnectSchemaError, match="not valid JSON"):
        parse_schema("")


def test_connect_schema_errors_are_value_errors() -> None:
    assert issubclass(ConnectSchemaError, ValueError)


def test_an_empty_struct_is_a_schema_without_columns() -> None:
    schema = parse_schema('{"type": "struct", "fields": []}')
    assert schema.result_type == StructType([])
    assert not schema.root.converts


# ---------------------------------------------------------------- what a `schema` value looks like


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, False),
        ("", False),
        ("public", False),  # the schema-name string some producers put there
        ('"public"', False),
        ("[]", False),
        ('{"fields": []}', False),
        ('{"type": 1}', False),
        ('{"type": "struct"}', True),
        ('{"type": "string", "optional": false}', True),
        (VALUE_SCHEMA, True),
    ],
)
def test_is_connect_schema(text: str | None, expected: bool) -> None:
    assert is_connect_schema(text) is expected
