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
