"""Access to the driver JVM behind a classic SparkSession (py4j), through which icesink uses
Iceberg's Java API. Spark Connect has none."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from icesink.errors import ConfigError
from icesink.model import TableRef

JavaObject = Any  # a py4j proxy


def jvm(spark: SparkSession) -> Any:
    handle = getattr(spark, "_jvm", None)
    if handle is None:
        raise ConfigError("icesink needs a classic SparkSession with a driver JVM; Spark Connect is not supported")
    return handle


def jsession(spark: SparkSession) -> Any:
    return spark._jsparkSession


def string_array(spark: SparkSession, items: list[str]) -> Any:
    array = spark.sparkContext._gateway.new_array(jvm(spark).java.lang.String, len(items))  # type: ignore[union-attr]
    for i, item in enumerate(items):
        array[i] = item
    return array


def table_identifier(spark: SparkSession, ref: TableRef) -> JavaObject:
    """Iceberg's TableIdentifier of `ref` (its namespace's levels split at dots): one py4j call,
    where building the namespace's String[] cost one per level and three more (a batch of 200
    tables made them for each table at its load and again at its commit)."""
    iceberg = jvm(spark).org.apache.iceberg
    if "." not in ref.name:
        return iceberg.catalog.TableIdentifier.parse(f"{ref.namespace}.{ref.name}")
    namespace = iceberg.catalog.Namespace.of(string_array(spark, ref.namespace.split(".")))
    return iceberg.catalog.TableIdentifier.of(namespace, ref.name)


def declared_field(obj: JavaObject, class_name: str, name: str) -> JavaObject | None:
    """The field `name` that `class_name` (`obj`'s class or one it extends) declares, opened
    through reflection (py4j sees public members only), or None when `obj` is not a `class_name`.
    Raises Py4JJavaError when that class declares no such field (another Iceberg release)."""
    cls = obj.getClass()
    while cls is not None and str(cls.getName()) != class_name:
        cls = cls.getSuperclass()
    if cls is None:
        return None
    field = cls.getDeclaredField(name)
    field.setAccessible(True)
    return field


def java_list(items: JavaObject) -> list[Any]:
    """The elements of a java.util.List, one py4j call each plus one. Iterating a py4j collection
    the Python way ends when the Java iterator throws NoSuchElementException, which PySpark's
    error conversion answers with ~35 more calls: 43 calls for an empty list."""
    return [items.get(i) for i in range(items.size())]
