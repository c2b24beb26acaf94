"""Which records a guessed pass left pending (icesink.batch.new_schemas.pending_records): exactly
those with a value or key schema reference the pass was not given."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pyspark.sql import SparkSession

from icesink.batch.decode import KEY
from icesink.batch.decode.avro import frame_key
from icesink.batch.new_schemas import pending_records
from icesink.batch.work import Planned

ONE, TWO, THREE = (b"\x00\x00\x00\x00" + bytes([i]) for i in (1, 2, 3))


class Framed:
    """A decoder's schema reference: the Confluent frame key, as the Avro decoder's."""

    def __init__(self, which: Any = None) -> None:
        self._args = () if which is None else (which,)

    def plan_column(self) -> Any:
        return frame_key(*self._args)


def test_records_with_a_value_or_key_schema_not_given_are_pending(spark: SparkSession) -> None:
    rows = [
        (1, ONE + b"body", ONE + b"k"),  # both known
        (2, TWO + b"body", ONE + b"k"),  # a new value schema
        (3, ONE + b"body", THREE + b"k"),  # a new key schema
        (4, b"not framed", None),  # no schema at all: an error of its own, not pending
        (5, None, ONE + b"k"),  # a tombstone
    ]
    schema = "id int, value binary, key binary, headers array<struct<key:string,value:binary>>"
    records = spark.createDataFrame([(i, v, k, None) for i, v, k in rows], schema)
    ctx = SimpleNamespace(decoder=Framed(), key_decoder=Framed(KEY))

    both = pending_records(ctx, Planned([ONE], [ONE], guessed=True))  # type: ignore[arg-type]
    assert sorted(r.id for r in records.where(both).collect()) == [2, 3]
    values_only = pending_records(ctx, Planned([ONE, TWO], None, guessed=True))  # type: ignore[arg-type]
    assert [r.id for r in records.where(values_only).collect()] == [], "keys the decoder looked at are never pending"
    nothing_known = pending_records(ctx, Planned([], [], guessed=True))  # type: ignore[arg-type]
    assert sorted(r.id for r in records.where(nothing_known).collect()) == [1, 2, 3, 5]
