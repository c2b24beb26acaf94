"""The plain JSON records a one-pass task makes dead letters of (tasks/dead_letters.json_problem,
and Debezium events without Connect schemas: tasks/plain_rows.DirectRows.letter), against Spark's
path on the same records: wherever the task judges, Spark's path makes the same dead letter (stage,
class, message); wherever Spark's path may make a row, the task does not judge (its table goes
Spark's way, as before). And a new table's columns inferred in Python over a sample with such
records are Spark's inference of it (schema/json_inference.py)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from icesink.batch.decode import ERROR, ROW
from icesink.batch.decode.json import JsonDecoder
from icesink.schema.envelope import EnvelopeSpec
from icesink.schema.json_inference import inferred
from icesink.tasks.dead_letters import EMPTY_VALUE, NOT_AN_OBJECT, NOT_JSON, NULL_VALUE, json_problem
from tests.support.frames import kafka_records
from tests.support.plain_events import LETTERED, UNLETTERED, change_rows, event

FRAME = b"\x00\x00\x00\x00\x07"

# Values the task judges, and its verdict (which must be Spark's path's).
JUDGED: dict[bytes, tuple[str, str, str]] = {
    b"": EMPTY_VALUE,
    b" \n\t\r": EMPTY_VALUE,
    FRAME: EMPTY_VALUE,
    FRAME + b"  ": EMPTY_VALUE,
    b"hello world": NOT_JSON,
    b"not json {": NOT_JSON,
    b"abc,def,1": NOT_JSON,
    b"<event id='1'/>": NOT_JSON,
    b"NaN": NOT_JSON,
    b"-Infinity": NOT_JSON,
    b"'quoted'": NOT_JSON,
    b".5": NOT_JSON,
    b"+1": NOT_JSON,
    b"# comment": NOT_JSON,
    b"/* c */ {}": NOT_JSON,
    b"\x1f{}": NOT_JSON,
    b"\x00\x01": NOT_JSON,  # too short for a frame: the zero byte is text
    FRAME + b"hello": NOT_JSON,
    FRAME + b"\x02\x06abc": NOT_JSON,  # an Avro body on a JSON topic
    b"\xff\xfe\x00": NOT_JSON,  # not UTF-8
    b'\xef\xbb\xbf{"id": 5}': NOT_JSON,  # a byte-order mark
    b'{"id": 1': NOT_JSON,  # cut short
    b'{"id": 1, "name": "a': NOT_JSON,
    b'{"id":': NOT_JSON,
    b"{": NOT_JSON,
    b"[1, ": NOT_JSON,
    b'{"id": NaN, "name": "x': NOT_JSON,  # cut short, NaN inside
    b'"cut': NOT_JSON,
    b"nope": NOT_JSON,
    b"-": NOT_JSON,
    b"null": NOT_AN_OBJECT,
    b" null ": NOT_AN_OBJECT,
    b"3": NOT_AN_OBJECT,
    b"-1.5e3": NOT_AN_OBJECT,
    b'"text"': NOT_AN_OBJECT,
    b"true": NOT_AN_OBJECT,
    b"[]": NOT_AN_OBJECT,
    b"18446744073709551616": NOT_AN_OBJECT,  # beyond a long: still a number
    b'[1, "a", [true, null]]': NOT_AN_OBJECT,
    FRAME + b"[1]": NOT_AN_OBJECT,
}

# Values the task leaves to Spark's path: rows there, or a verdict not certain here.
LEFT: list[bytes] = [
    b'{"id": 1}',
    b"{}",
    b'{"id": 1} trailing',  # Jackson stops after the first value: a row
    b"{'id': 1}",  # single quotes: a row with Spark's options
    b'{"id": 1, "id": 2}',
    b'[{"id": 1}]',  # Spark's inference takes the array's objects' fields
    b'[1, {"id": 1}]',
    b'"\\ud800"',  # a lone surrogate: orjson refuses it, Jackson reads it
    b'"\xff"',  # not UTF-8 inside a string
    b"1e400",
    b'{"id": 1,}',
    b'"\\q"',  # a bad escape
    b"nulll",
    b"-1x",
    b"[" * 3000,
]


def spark_verdicts(spark: SparkSession, values: list[bytes]) -> list[tuple[str, str, str] | None]:
    """Spark's path's (stage, class, message) for each value (None: a row), decoded into a table of
    (id bigint, name string) as a plain JSON table's records are."""
    inspected = JsonDecoder(spark).inspect(kafka_records(spark, values))
    target = StructType([StructField("id", LongType()), StructField("name", StringType())])
    rows = inspected.parse(target).orderBy("offset").collect()
    return [None if r[ERROR] is None else (r[ERROR].stage, r[ERROR].error_class, r[ERROR].message) for r in rows]


def test_what_a_task_judges_spark_path_judges_alike(spark: SparkSession) -> None:
    values = [*JUDGED, *LEFT]
    spark_says = dict(zip(values, spark_verdicts(spark, values), strict=True))
    task_says = {v: json_problem(v) for v in values}
    assert {v: task_says[v] for v in JUDGED} == JUDGED
    assert {v: spark_says[v] for v in JUDGED} == JUDGED
    assert [v for v in LEFT if task_says[v] is not None] == []
    # Why the task must not judge text Python's reader refuses: Spark's path makes rows of some.
    assert {v for v in LEFT if spark_says[v] is None} >= {b"{'id': 1}", b'{"id": 1} trailing', b'{"id": 1, "id": 2}'}


def inferred_by_spark(spark: SparkSession, values: list[bytes | None]) -> Any:
    return JsonDecoder(spark).inspect(kafka_records(spark, values)).schema


def test_dead_letters_add_no_column_to_a_new_table(spark: SparkSession) -> None:
    good: list[bytes | None] = [b'{"id": 1, "name": "a"}', b'{"id": 2, "tags": ["x"]}']
    sample = good + list(JUDGED)
    assert inferred(sample) == inferred_by_spark(spark, sample) == inferred(good)
    only_letters: list[bytes | None] = [b"hello", b"", b"3"]
    assert inferred(only_letters) == inferred_by_spark(spark, only_letters) == StructType([])
    # An array of objects adds their fields in Spark: left to it.
    assert inferred([*good, b'[{"z": 1}]']) is None
    assert inferred_by_spark(spark, [*good, b'[{"z": 1}]']).fieldNames() == ["id", "name", "tags", "z"]


def envelope_verdicts(spark: SparkSession, values: list[bytes]) -> tuple[list[Any], list[Any]]:
    """Spark's path's rows and (stage, class, message) of plain JSON Debezium events (None: a row),
    decoded as a changelog table's with the `_source_lsn` column, as the one batch they are."""
    inspected = JsonDecoder(spark, EnvelopeSpec(source_columns=("lsn",))).inspect(kafka_records(spark, values))
    target = StructType(
        [StructField("id", LongType()), StructField("email", StringType()), StructField("_op", StringType()),
         StructField("_source_lsn", LongType())]
    )  # fmt: skip
    found = inspected.parse(target).orderBy("offset").collect()
    says = [None if r[ERROR] is None else (r[ERROR].stage, r[ERROR].error_class, r[ERROR].message) for r in found]
    return [r[ROW] and tuple(r[ROW]) for r in found], says


def test_the_change_events_a_task_letters_spark_path_letters_alike(spark: SparkSession) -> None:
    """Among changes (which set the batch's inferred envelope, as a topic's other events do), each
    event a task makes a dead letter of is one on Spark's path, in the same words, and the changes
    stay its rows; an event the task leaves, Spark's path may read otherwise (another error, a
    wider column, no source columns for the batch's other rows)."""
    good = [event("c", None, {"id": 1, "email": "a@x"}, 10), event("d", {"id": 1, "email": None}, None, 11)]
    rows, spark_says = envelope_verdicts(spark, [*good, *(v for v, _, _ in LETTERED)])
    expected = [("decode", "DebeziumEnvelopeError", m) for _, _, m in LETTERED]
    assert rows[:2] == [(1, "a@x", "I", 10), (1, None, "D", 11)]
    assert spark_says == [None, None, *expected]
    assert [change_rows().letter(v, k) for v, k, _ in LETTERED] == expected
    left = [v for v, _ in UNLETTERED]
    rows, spark_says = envelope_verdicts(spark, [*good, *left])
    assert rows[:2] == [(1, "a@x", "I", None), (1, None, "D", None)], "a source of a string: no lsn column"
    assert {why[1] for why in spark_says[2:] if why is not None} == {"DebeziumEnvelopeError", "TypeMismatch"}


def test_wrapped_change_events_without_a_top_level_op_are_rows_on_sparks_path(spark: SparkSession) -> None:
    """Why a task makes no letter of a change event with a `payload` and no op: Spark's path
    unwraps a batch of them, and makes rows."""
    wrapped = [v for v, _ in UNLETTERED if b'"payload"' in v]
    assert len(wrapped) == 2
    rows, spark_says = envelope_verdicts(spark, wrapped)
    assert spark_says == [None, None]
    assert [r[:3] for r in rows] == [(1, None, "I")] * 2
    assert [change_rows().letter(v, None) for v in wrapped] == [None, None]


def test_a_null_value_among_connect_json_records_is_sparks_null_value_letter(spark: SparkSession) -> None:
    """The letter a task makes of a Connect JSON append table's null value (tasks/json_records.py)."""
    record = b'{"schema":{"type":"struct","fields":[{"field":"id","type":"int64"}]},"payload":{"id":1}}'
    inspected = JsonDecoder(spark).inspect(kafka_records(spark, [record, None]))
    found = inspected.parse(StructType([StructField("id", LongType())])).orderBy("offset").collect()
    assert [None if r[ERROR] is None else tuple(r[ERROR])[:3] for r in found] == [None, NULL_VALUE]
