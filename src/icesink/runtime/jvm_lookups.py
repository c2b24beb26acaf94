"""The driver's py4j names, looked up in the JVM once per process instead of on every use.

Every `spark._jvm.<name>` (and each step of `jvm.org.apache.iceberg.X`) is a round trip in which
py4j asks the JVM's class loader for the name, and, for a bare name or a package step, first for
classes that do not exist: `org`, then `java.lang.org`, `org.apache.spark.api.java.org`, ... each a
miss that looks into every one of the ~300 jars on the class path. PySpark does this for each
column expression (`functions`, `PythonUtils`, `py4j.reflection.TypeUtil`), icesink for each
Iceberg class it calls. A batch into 50 tables made 10,700 of these lookups, and with its tables'
steps run side by side they took 15 s of its threads' time (JFR: a third of the driver threads'
CPU in the write step went to missed `Class.forName`); a one-table batch makes ~440.

A class's static members are the same: each `Class.method(...)` first asks the JVM what `method`
is (py4j keeps nothing of a class between uses), then calls it. PySpark asks for each column
function (`functions.col`), icesink for each per-table static (`TableIdentifier.parse`,
`TableCommit.create`, `SchemaParser.toJson`): a batch into 200 tables asked ~1,000 times.

The answer for a name does not change while the JVM lives (a class stays that class, a static
method that method), so the first one is kept as an attribute of the view, package or class
object, where Python finds it without calling `__getattr__` again. Kept: classes, a class's
static methods and nested classes; and packages, but only names that start with a lower-case
letter (Java's package names). py4j answers "package" for any name it cannot resolve as a class,
so a capitalised name it called a package may become a class after a later `java_import`; such an
answer is not kept. A static field's value is not kept either: it may change.
"""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JavaClass, JavaMember, JavaPackage, JVMView
from pyspark.sql import SparkSession


def _keep(owner: Any, name: str, value: Any) -> Any:
    if isinstance(value, JavaPackage):
        if type(value) is JavaPackage:
            value.__class__ = _KeptPackage
        if not name[:1].islower():
            return value
    elif isinstance(value, JavaClass):
        if type(value) is JavaClass:
            value.__class__ = _KeptClass
    elif not isinstance(value, JavaMember):  # a static field's value
        return value
    object.__setattr__(owner, name, value)
    return value


class _KeptClass(JavaClass):  # type: ignore[misc]
    def __getattr__(self, name: str) -> Any:
        return _keep(self, name, JavaClass.__getattr__(self, name))


class _KeptPackage(JavaPackage):  # type: ignore[misc]
    def __getattr__(self, name: str) -> Any:
        return _keep(self, name, JavaPackage.__getattr__(self, name))


class _KeptView(JVMView):  # type: ignore[misc]
    def __getattr__(self, name: str) -> Any:
        return _keep(self, name, JVMView.__getattr__(self, name))


def keep_jvm_lookups(spark: SparkSession) -> None:
    """Makes the session's JVM view (`spark.sparkContext._jvm`, shared by PySpark and icesink)
    keep what it looks up. Idempotent."""
    view = spark.sparkContext._jvm
    if view is not None and type(view) is JVMView:
        view.__class__ = _KeptView
