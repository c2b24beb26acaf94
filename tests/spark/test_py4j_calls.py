"""What the driver's per-table steps cost in py4j calls: a batch routed to hundreds of tables pays
each call hundreds of times (a round trip, and JVM work, while other tables' threads wait)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from py4j import clientserver
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from icesink.batch.decode import ERROR, ERROR_TYPE, ROW, error, fixed, good_rows, is_pending, no_error, pending
from icesink.iceberg.jvm import java_list
from icesink.schema.evolution import CORRUPT_COLUMN


@contextmanager
def py4j_commands(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The py4j commands the driver sends inside the block."""
    sent: list[str] = []
    original = clientserver.ClientServerConnection.send_command

    def send(self: clientserver.ClientServerConnection, command: str) -> str:
        sent.append(command)
        return str(original(self, command))

    with monkeypatch.context() as m:
        m.setattr(clientserver.ClientServerConnection, "send_command", send)
        yield sent


def test_a_java_list_is_read_without_the_exception_that_ends_py4j_iteration(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    empty, three = jvm.java.util.ArrayList(), jvm.java.util.ArrayList()
    for x in ("a", "b", "c"):
        three.add(x)
    with py4j_commands(monkeypatch) as sent:
        assert java_list(empty) == []
    assert len(sent) == 1, sent  # size(); iterating it the py4j way took 43 calls
    with py4j_commands(monkeypatch) as sent:
        assert java_list(three) == ["a", "b", "c"]
    assert len(sent) == 4, sent
    assert not any("isInstanceOf" in c for c in sent), "no Java exception was classified"


def test_fixed_expressions_are_built_once_and_mean_the_same(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = error("decode", "JsonParseError", "not valid JSON"), no_error(), is_pending()
    with py4j_commands(monkeypatch) as sent:
        again = error("decode", "JsonParseError", "not valid JSON"), no_error(), is_pending(ERROR)
    assert sent == []
    assert all(a is b for a, b in zip(again, built, strict=True))
    assert fixed(("test", 1), lambda: F.lit(1)) is not fixed(("test", 2), lambda: F.lit(2))

    records = spark.createDataFrame([(1,), (2,), (3,)], "n int").select(
        "n",
        F.when(F.col("n") == 1, no_error())
        .when(F.col("n") == 2, pending())
        .otherwise(error("decode", "JsonParseError", F.lit("built per call")))
        .alias(ERROR),
    )
    rows = records.select(
        "n", is_pending().alias("by_name"), is_pending(F.col(ERROR)).alias("by_column"), F.col(f"{ERROR}.message")
    ).collect()
    assert [(r.n, r.by_name, r.by_column, r.message) for r in sorted(rows)] == [
        (1, False, False, None),
        (2, True, True, "a writer schema this pass did not know"),
        (3, False, False, "built per call"),
    ]


def test_good_rows_drop_the_parse_s_trailing_corrupt_record_column(spark: SparkSession) -> None:
    target = StructType([StructField("id", LongType()), StructField("name", StringType())])
    row = StructType([*target.fields, StructField(CORRUPT_COLUMN, StringType())])
    parsed = spark.createDataFrame(
        [((1, "a", None), None), ((2, None, '{"id": "x"}'), ("decode", "TypeMismatch", "m"))],
        StructType([StructField(ROW, row), StructField(ERROR, ERROR_TYPE)]),
    )
    good = good_rows(parsed, target)
    assert good.columns == ["id", "name"]
    assert [tuple(r) for r in good.collect()] == [(1, "a")]
