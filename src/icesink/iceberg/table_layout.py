"""What a new table is made of in Iceberg's Java API (through py4j): its schema with the key
columns as identifier fields, its partition spec from `tables.partition_by`, its sort order and
its properties (format v2). iceberg/tables.py builds the table from them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql.types import StructField, StructType

from icesink.iceberg.jvm import JavaObject
from icesink.schema.partitioning import PartitionField


def spark_jtype(jvm: Any, dtype: Any) -> JavaObject:
    """A Spark type as the JVM's."""
    return jvm.org.apache.spark.sql.types.DataType.fromJson(dtype.json())


def table_schema(jvm: Any, schema: StructType, key_columns: Sequence[str], identifiers: bool = True) -> JavaObject:
    """The Iceberg schema of a new table: every column optional but the key columns, which are
    required and (with `identifiers`) its identifier fields."""
    keys = set(key_columns)
    fields = [StructField(f.name, f.dataType, f.name not in keys, f.metadata) for f in schema.fields]
    ice = jvm.org.apache.iceberg
    jschema = ice.spark.SparkSchemaUtil.convert(spark_jtype(jvm, StructType(fields)))
    if not keys or not identifiers:
        return jschema
    ids = jvm.java.util.HashSet()
    for k in key_columns:
        ids.add(jschema.findField(k).fieldId())
    return ice.Schema(jschema.columns(), ids)


def partition_spec(jvm: Any, jschema: JavaObject, fields: Sequence[PartitionField]) -> JavaObject:
    ice = jvm.org.apache.iceberg
    if not fields:
        return ice.PartitionSpec.unpartitioned()
    b = ice.PartitionSpec.builderFor(jschema)
    for f in fields:
        if f.transform == "identity":
            b = b.identity(f.column)
        elif f.transform in ("bucket", "truncate"):
            b = getattr(b, f.transform)(f.column, f.param)
        else:
            b = getattr(b, f.transform)(f.column)
    return b.build()


def sort_order(jvm: Any, jschema: JavaObject, sort_by: Sequence[str]) -> JavaObject | None:
    if not sort_by:
        return None
    order = jvm.org.apache.iceberg.SortOrder.builderFor(jschema)
    for column in sort_by:
        order = order.asc(column)
    return order.build()


def table_properties(jvm: Any, properties: Mapping[str, str]) -> JavaObject:
    props = jvm.java.util.HashMap()
    for k, v in properties.items():
        props.put(k, v)
    props.put("format-version", "2")
    return props
