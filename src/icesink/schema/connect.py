"""Kafka Connect schemas in JSON (JsonConverter with `schemas.enable=true`) into exact column types.

A record Connect's JsonConverter writes with schemas on is `{"schema": S, "payload": P}`, and S,
not the look of P, says what P holds. Inferring from P gets Debezium's defaults wrong: a Decimal
is the base64 text of its unscaled bytes, a timestamptz an ISO string, an int32 a number that
inference widens to bigint. Here S decides the column types:

  int8, int16, int32 -> int;  int64 -> bigint;  float32 -> float;  float64 -> double;  boolean;
  string;  bytes -> binary (base64 in the JSON);  struct, array and map (string keys) nest.
  org.apache.kafka.connect.data.Decimal    base64 of the unscaled bytes -> decimal(p, s), with s
      from the `scale` parameter and p from `connect.decimal.precision` (else 38, the most Iceberg
      allows); converted exactly: a value that does not fit is a dead letter, never rounded, and
      never passes through a double
  org.apache.kafka.connect.data.Date       int32 days since 1970-01-01 -> date
  org.apache.kafka.connect.data.Time       int32 millis of the day     -> bigint micros of the day
  org.apache.kafka.connect.data.Timestamp  int64 epoch millis          -> timestamp (with zone)
  io.debezium.time.* and io.debezium.data.VariableScaleDecimal as for Avro (`SEMANTIC_TYPES`),
      io.debezium.time.NanoTime -> bigint micros of the day; Debezium's Json, Uuid, Xml, Enum,
      EnumSet, Ltree, ZonedTime, Interval stay strings; Bits is binary; geometry structs keep
      their `wkb` bytes as binary.

Every column is nullable: a Debezium delete's `before` image holds only the key. A required
field that is null takes its schema default, as Connect's own converter would.

Pure, over pyspark's type objects: both decoders read a record's schema here, Spark's path
(batch/decode/connect_columns.py converts the values in Spark expressions) and the one-pass
tasks (tasks/decode_connect.py converts them in Arrow).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

DECIMAL = "org.apache.kafka.connect.data.Decimal"
PRECISION_PARAMETER = "connect.decimal.precision"
DEFAULT_DECIMAL_PRECISION = 38  # when a Decimal schema does not say (Iceberg's maximum)
VARIABLE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
VARIABLE_DECIMAL_TYPE = DecimalType(38, 18)
ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"

# Debezium's semantic types, in Avro (batch/decode/semantic.py) as in Connect JSON: the column
# type each becomes, and what Connect JSON's payload holds of it.
SEMANTIC_TYPES: dict[str, DataType] = {
    "io.debezium.time.Date": DateType(),
    "io.debezium.time.Timestamp": TimestampNTZType(),
    "io.debezium.time.MicroTimestamp": TimestampNTZType(),
    "io.debezium.time.NanoTimestamp": TimestampNTZType(),
    ZONED_TIMESTAMP: TimestampType(),
    "io.debezium.time.Time": LongType(),
    "io.debezium.time.MicroTime": LongType(),
    VARIABLE_DECIMAL: VARIABLE_DECIMAL_TYPE,
}
DEBEZIUM_PARSE: dict[str, DataType] = {
    "io.debezium.time.Date": IntegerType(),
    "io.debezium.time.Timestamp": LongType(),
    "io.debezium.time.MicroTimestamp": LongType(),
    "io.debezium.time.NanoTimestamp": LongType(),
    ZONED_TIMESTAMP: StringType(),  # ISO-8601 with an offset, e.g. 2024-01-02T03:04:05.123456Z
    "io.debezium.time.Time": IntegerType(),
    "io.debezium.time.MicroTime": LongType(),
    VARIABLE_DECIMAL: StructType([StructField("scale", IntegerType()), StructField("value", BinaryType())]),
}

# Logical types (but Decimal, whose types take its parameters): what the payload holds of each
# (parse) and its column type (result). A value of a CHECKED one may not convert exactly (a
# decimal that overflows, a zoned timestamp that does not parse): its record is a dead letter.
LOGICAL: dict[str, tuple[DataType, DataType]] = {
    "org.apache.kafka.connect.data.Date": (IntegerType(), DateType()),
    "org.apache.kafka.connect.data.Time": (IntegerType(), LongType()),  # micros of the day
    "org.apache.kafka.connect.data.Timestamp": (LongType(), TimestampType()),
    # Not among Avro's conversions (there it stays nanoseconds): micros of the day like Time and MicroTime.
    "io.debezium.time.NanoTime": (LongType(), LongType()),
    **{name: (parse, SEMANTIC_TYPES[name]) for name, parse in DEBEZIUM_PARSE.items()},
}
CHECKED = frozenset({DECIMAL, ZONED_TIMESTAMP, VARIABLE_DECIMAL})

_PRIMITIVES: dict[str, DataType] = {
    "int8": IntegerType(),
    "int16": IntegerType(),
    "int32": IntegerType(),
    "int64": LongType(),
    "float32": FloatType(),
    "float64": DoubleType(),
    # JsonConverter's own spelling of FLOAT32 and FLOAT64 in the schemas it writes.
    "float": FloatType(),
    "double": DoubleType(),
    "boolean": BooleanType(),
    "string": StringType(),
    "bytes": BinaryType(),
}


class ConnectSchemaError(ValueError):
    """A Connect schema icesink cannot turn into columns (its records become dead letters)."""


@dataclass(frozen=True)
class Node:
    """One Connect schema: how its JSON value parses, what column type it becomes, and how."""

    parse: DataType
    result: DataType
    logical: str | None = None  # the name of its logical type (LOGICAL's, or DECIMAL)
    scale: int = 0  # a Decimal's
    default: Any = None  # applied when a required field's value is null
    fields: tuple[tuple[str, Node], ...] = ()  # struct
    element: Node | None = None  # array element, map value
    name: str | None = None  # the schema's logical name, for messages

    @property
    def converts(self) -> bool:
        """Whether the parsed value needs any conversion to become the column value."""
        if self.logical is not None or self.default is not None:
            return True
        if self.fields:
            return any(n.converts for _, n in self.fields)
        return self.element is not None and self.element.converts

    @property
    def checked(self) -> bool:
        if self.logical is not None:
            return self.logical in CHECKED
        return any(n.checked for _, n in self.fields) or (self.element is not None and self.element.checked)


@dataclass(frozen=True)
class ConnectSchema:
    """A record's Connect schema, ready to parse its payload."""

    text: str  # the schema JSON as the records carry it
    root: Node
    names: set[str] = field(default_factory=set)  # logical type names it uses

    @property
    def parse_type(self) -> StructType:
        assert isinstance(self.root.parse, StructType)
        return self.root.parse

    @property
    def result_type(self) -> StructType:
        assert isinstance(self.root.result, StructType)
        return self.root.result


def _decimal(schema: dict[str, Any]) -> Node:
    params = schema.get("parameters") or {}
    try:
        scale = int(params["scale"])
        precision = int(params.get(PRECISION_PARAMETER, DEFAULT_DECIMAL_PRECISION))
    except (KeyError, TypeError, ValueError):
        raise ConnectSchemaError(f"Decimal without an integer `scale` parameter: {params}") from None
    if scale < 0:
        raise ConnectSchemaError(f"Decimal with a negative scale ({scale}) has no Iceberg type")
    if scale > 38:
        raise ConnectSchemaError(f"Decimal with scale {scale} does not fit Iceberg's decimal(38, s)")
    # Iceberg needs scale <= precision <= 38; a value with more digits than 38 does not fit and is a dead letter.
    target = DecimalType(min(max(precision, scale), 38), scale)
    return Node(BinaryType(), target, DECIMAL, scale, name=DECIMAL)


def _default_literal(schema: dict[str, Any], result: DataType) -> Any:
    """A required primitive field's default (None when it has none or it is not a plain value)."""
    if schema.get("optional", False) or "default" not in schema or schema.get("name"):
        return None
    value = schema["default"]
    if value is None or isinstance(value, dict | list) or isinstance(result, BinaryType):
        return None
    return value


def node(schema: Any, path: str = "") -> Node:
    """The Node of a Connect schema (a parsed JSON object). Raises ConnectSchemaError naming the path."""
    where = f" at {path}" if path else ""
    if not isinstance(schema, dict) or not isinstance(schema.get("type"), str):
        raise ConnectSchemaError(f"not a Connect schema{where}: {json.dumps(schema)[:200]}")
    kind = schema["type"]
    name = schema.get("name")
    if name == DECIMAL:
        return _decimal(schema)
    logical = LOGICAL.get(name) if isinstance(name, str) else None
    if logical is not None:
        return Node(*logical, logical=name, name=name)
    if kind == "struct":
        return _struct(schema, path, where)
    if kind == "array":
        elem = node(schema.get("items"), f"{path}[]")
        return Node(ArrayType(elem.parse, True), ArrayType(elem.result, True), element=elem, name=name)
    if kind == "map":
        return _map(schema, path, where)
    primitive = _PRIMITIVES.get(kind)
    if primitive is None:
        raise ConnectSchemaError(f"unknown Connect type {kind!r}{where}")
    return Node(primitive, primitive, default=_default_literal(schema, primitive), name=name)


def _struct(schema: dict[str, Any], path: str, where: str) -> Node:
    children = []
    for f in schema.get("fields") or []:
        fname = f.get("field") if isinstance(f, dict) else None
        if not isinstance(fname, str):
            raise ConnectSchemaError(f"struct field without a name{where}")
        children.append((fname, node(f, f"{path}.{fname}" if path else fname)))
    parse = StructType([StructField(n, c.parse, True) for n, c in children])
    result = StructType([StructField(n, c.result, True) for n, c in children])
    return Node(parse, result, fields=tuple(children), name=schema.get("name"))


def _map(schema: dict[str, Any], path: str, where: str) -> Node:
    keys = schema.get("keys")
    if not isinstance(keys, dict) or keys.get("type") != "string" or keys.get("name"):
        # JsonConverter writes such maps as arrays of [key, value] pairs: no column type fits both.
        raise ConnectSchemaError(f"map with non-string keys{where}")
    value = node(schema.get("values"), f"{path}{{}}")
    return Node(MapType(StringType(), value.parse, True), MapType(StringType(), value.result, True), element=value)


def parse_schema(text: str) -> ConnectSchema:
    """The ConnectSchema of a record's `schema` JSON text; its top level must be a struct."""
    try:
        raw = json.loads(text)
    except ValueError:
        raise ConnectSchemaError("the `schema` is not valid JSON") from None
    root = node(raw)
    if not isinstance(root.result, StructType):
        raise ConnectSchemaError(f"the top-level schema is {raw.get('type')}, not a struct: no columns to map it to")
    return ConnectSchema(text, root, _names(root))


def _names(n: Node) -> set[str]:
    out = {n.name} if n.name else set()
    for _, c in n.fields:
        out |= _names(c)
    if n.element is not None:
        out |= _names(n.element)
    return out


def is_connect_schema(text: str | None) -> bool:
    """Whether a record's top-level `schema` value looks like a Connect schema (an object with a type)."""
    if not text:
        return False
    try:
        raw = json.loads(text)
    except ValueError:
        return False
    return isinstance(raw, dict) and isinstance(raw.get("type"), str)
