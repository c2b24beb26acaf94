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
  io.debezium.time.* and io.debezium.data.VariableScaleDecimal as for Avro (see `semantic`),
      io.debezium.time.NanoTime -> bigint micros of the day; Debezium's Json, Uuid, Xml, Enum,
      EnumSet, Ltree, ZonedTime, Interval stay strings; Bits is binary; geometry structs keep
      their `wkb` bytes as binary.

Every column is nullable: a Debezium delete's `before` image holds only the key. A required
field that is null takes its schema default, as Connect's own converter would.

Pure over the parsed schema, except the Column builders, which only compose Spark expressions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
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
    TimestampType,
)

from icesink.batch.decode import semantic

DECIMAL = "org.apache.kafka.connect.data.Decimal"
PRECISION_PARAMETER = "connect.decimal.precision"
DEFAULT_DECIMAL_PRECISION = 38  # when a Decimal schema does not say (Iceberg's maximum)

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
class _Logical:
    parse: DataType  # what from_json reads the payload value as
    result: DataType  # the column type
    convert: Callable[[Column], Column]
    checked: bool  # the conversion yields null for a value it cannot take exactly (a dead letter)


# What from_json parses each of Debezium's semantic types as; they convert as for Avro
# (`semantic.CONVERSIONS`), and those that can fail to convert exactly are checked.
_DEBEZIUM_PARSE: dict[str, DataType] = {
    "io.debezium.time.Date": IntegerType(),
    "io.debezium.time.Timestamp": LongType(),
    "io.debezium.time.MicroTimestamp": LongType(),
    "io.debezium.time.NanoTimestamp": LongType(),
    semantic.ZONED_TIMESTAMP: StringType(),  # ISO-8601 with an offset, e.g. 2024-01-02T03:04:05.123456Z
    "io.debezium.time.Time": IntegerType(),
    "io.debezium.time.MicroTime": LongType(),
    semantic.VARIABLE_DECIMAL: StructType([StructField("scale", IntegerType()), StructField("value", BinaryType())]),
}
_CHECKED = {semantic.ZONED_TIMESTAMP, semantic.VARIABLE_DECIMAL}

# Logical types whose parse and result types do not depend on parameters.
_LOGICAL: dict[str, _Logical] = {
    "org.apache.kafka.connect.data.Date": _Logical(IntegerType(), DateType(), F.date_from_unix_date, False),
    "org.apache.kafka.connect.data.Time": _Logical(IntegerType(), LongType(), lambda c: c.cast("long") * 1000, False),
    "org.apache.kafka.connect.data.Timestamp": _Logical(LongType(), TimestampType(), F.timestamp_millis, False),
    # Not among Avro's conversions (there it stays nanoseconds): micros of the day like Time and MicroTime.
    "io.debezium.time.NanoTime": _Logical(LongType(), LongType(), lambda c: F.floor(c / 1000).cast("long"), False),
    **{name: _Logical(parse, *semantic.CONVERSIONS[name], name in _CHECKED) for name, parse in _DEBEZIUM_PARSE.items()},
}


@dataclass(frozen=True)
class Node:
    """One Connect schema: how its JSON value parses, what column type it becomes, and how."""

    parse: DataType
    result: DataType
    logical: _Logical | None = None
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
            return self.logical.checked
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

    def convert(c: Column) -> Column:
        return semantic.exact_decimal(c, F.lit(scale), target)

    return Node(BinaryType(), target, _Logical(BinaryType(), target, convert, True), name=DECIMAL)


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
    logical = _LOGICAL.get(name) if isinstance(name, str) else None
    if logical is not None:
        return Node(logical.parse, logical.result, logical, name=name)
    if kind == "struct":
        children = []
        for f in schema.get("fields") or []:
            fname = f.get("field") if isinstance(f, dict) else None
            if not isinstance(fname, str):
                raise ConnectSchemaError(f"struct field without a name{where}")
            children.append((fname, node(f, f"{path}.{fname}" if path else fname)))
        parse = StructType([StructField(n, c.parse, True) for n, c in children])
        result = StructType([StructField(n, c.result, True) for n, c in children])
        return Node(parse, result, fields=tuple(children), name=name)
    if kind == "array":
        elem = node(schema.get("items"), f"{path}[]")
        return Node(ArrayType(elem.parse, True), ArrayType(elem.result, True), element=elem, name=name)
    if kind == "map":
        keys = schema.get("keys")
        if not isinstance(keys, dict) or keys.get("type") != "string" or keys.get("name"):
            # JsonConverter writes such maps as arrays of [key, value] pairs: no column type fits both.
            raise ConnectSchemaError(f"map with non-string keys{where}")
        value = node(schema.get("values"), f"{path}{{}}")
        return Node(MapType(StringType(), value.parse, True), MapType(StringType(), value.result, True), element=value)
    primitive = _PRIMITIVES.get(kind)
    if primitive is None:
        raise ConnectSchemaError(f"unknown Connect type {kind!r}{where}")
    return Node(primitive, primitive, default=_default_literal(schema, primitive), name=name)


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


# ---------------------------------------------------------------- Spark expressions


def convert(col: Column, n: Node) -> Column:
    """`col` (the payload value parsed as `n.parse`) as `n.result`."""
    if not n.converts:
        return col
    if n.logical is not None:
        return n.logical.convert(col)
    if n.default is not None:
        return F.coalesce(col, F.lit(n.default).cast(n.result))
    if n.fields:
        out = [convert(col[name], c).alias(name) for name, c in n.fields]
        return F.when(col.isNull(), F.lit(None).cast(n.result)).otherwise(F.struct(*out))
    assert n.element is not None
    elem = n.element
    if isinstance(n.parse, MapType):
        return F.transform_values(col, lambda _, v: convert(v, elem))
    return F.transform(col, lambda x: convert(x, elem))


def lost(raw: Column, converted: Column, n: Node) -> Column | None:
    """True where a checked conversion (a decimal, a zoned timestamp) left null for a value that
    was there: such a record is a dead letter, not a row with a null. None when nothing is checked."""
    if not n.checked:
        return None
    if n.logical is not None:
        return raw.isNotNull() & converted.isNull()
    if n.fields:
        parts = [c for name, child in n.fields if (c := lost(raw[name], converted[name], child)) is not None]
        out = parts[0]
        for p in parts[1:]:
            out = out | p
        return raw.isNotNull() & F.coalesce(out, F.lit(False))
    assert n.element is not None
    elem = n.element
    if isinstance(n.parse, MapType):
        any_lost = F.exists(
            F.map_keys(raw),
            lambda k: F.coalesce(lost(raw[k], converted[k], elem), F.lit(False)),  # type: ignore[arg-type]
        )
    else:
        any_lost = F.exists(
            F.sequence(F.lit(1), F.greatest(F.size(raw), F.lit(1))),
            lambda i: F.coalesce(lost(F.get(raw, i - 1), F.get(converted, i - 1), elem), F.lit(False)),  # type: ignore[arg-type]
        )
    return raw.isNotNull() & F.coalesce(any_lost, F.lit(False))
