"""The driver keeps the py4j names it looked up (runtime/jvm_lookups.py), and what it keeps still
calls the JVM as before."""

from __future__ import annotations

import pytest
from py4j.java_gateway import JavaClass, JavaPackage, java_import
from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from icesink.runtime.jvm_lookups import keep_jvm_lookups


@pytest.fixture
def jvm(spark: SparkSession):  # type: ignore[no-untyped-def]
    keep_jvm_lookups(spark)  # the job's session has it already; the plain one gets it here
    keep_jvm_lookups(spark)  # and a second call changes nothing
    return spark.sparkContext._jvm


def test_a_class_is_looked_up_once_and_still_works(jvm) -> None:  # type: ignore[no-untyped-def]
    functions = jvm.org.apache.spark.sql.functions
    assert isinstance(functions, JavaClass)
    assert jvm.org.apache.spark.sql.functions is functions  # kept: no second round trip
    assert jvm.org is jvm.org
    assert isinstance(jvm.org, JavaPackage)
    assert functions.lit(42).toString() == "42"
    # A bare name, found through PySpark's imports (org.apache.spark.sql.*), is kept too.
    assert jvm.functions is jvm.functions
    assert jvm.functions.lit("x").toString() == "'x'"


def test_unknown_names_fail_as_before(jvm) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match="not callable"):  # py4j took it for a package
        jvm.org.apache.spark.sql.NoSuchClass.make()
    with pytest.raises(Py4JError):
        jvm.org.apache.spark.sql.functions.noSuchMethod()


def test_a_capitalised_name_that_was_no_class_yet_is_not_kept(jvm) -> None:  # type: ignore[no-untyped-def]
    # py4j calls an unresolved name a package; after a java_import the same name is a class.
    assert isinstance(jvm.ArrayDeque, JavaPackage)
    java_import(jvm, "java.util.ArrayDeque")
    assert isinstance(jvm.ArrayDeque, JavaClass)
    assert jvm.ArrayDeque().isEmpty() is True


def test_a_class_s_static_methods_and_nested_classes_are_kept_its_fields_read_each_time(jvm) -> None:  # type: ignore[no-untyped-def]
    functions = jvm.org.apache.spark.sql.functions
    lit = functions.lit
    assert functions.lit is lit  # kept: asked of the JVM once
    assert lit(7).toString() == "7"
    assert functions.lit("y").toString() == "'y'"
    entry = jvm.java.util.AbstractMap.SimpleEntry  # a nested class, itself keeping its members
    assert isinstance(entry, JavaClass)
    assert jvm.java.util.AbstractMap.SimpleEntry is entry
    assert entry("k", 1).getKey() == "k"
    integer = jvm.java.lang.Integer
    assert integer.MAX_VALUE == 2**31 - 1
    assert "MAX_VALUE" not in vars(integer), "a static field's value is read each time (it may change)"
    with pytest.raises(Py4JError):
        integer.noSuchMember  # noqa: B018
    assert "noSuchMember" not in vars(integer)
