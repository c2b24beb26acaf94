"""The routing pass of field-routed plain JSON topics in Python tasks (batch/route_tasks.py): each
task reads its share of the topics' records with librdkafka and returns, per topic, the field's
values it met (and how many records held each), and the dead letters of the records no table takes:
a value that is not JSON beyond doubt (tasks/dead_letters.json_problem), a record without the
field's value, or a value the rule refuses (icesink/routing.py), each worded as Spark's routing
pass words it (batch/route.py).

A topic where a task meets a record it cannot judge as Spark's decoder would (a null value, text
Spark's lenient parser may read, a value it would spell otherwise: tasks/routing.py) is reported
unsure, and the driver routes that topic with Spark's pass instead.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from icesink.config import Unmatched
from icesink.kafka import reader
from icesink.model import PartitionRange, TableRef
from icesink.routing import Route
from icesink.tasks.dead_letters import Letter, json_problem
from icesink.tasks.decode_json import json_object
from icesink.tasks.routing import RouteFilter

log = logging.getLogger(__name__)

# A row per (topic, value) met, per letter, and per topic a task could not judge (`unsure`).
ROUTE_DDL = (
    "topic string, value string, records long, partition int, offset long, stage string, error_class string, "
    "message string, unsure boolean"
)


@dataclass
class TopicValues:
    """What a task found in one topic's records."""

    values: Counter[str]
    letters: list[Letter]
    unsure: bool = False


class _Judge:
    """One topic's records, one at a time, as Spark's routing pass routes them."""

    def __init__(self, topic: str, route: Route, reserved: TableRef) -> None:
        assert route.field is not None
        self._topic, self._route, self._reserved = topic, route, reserved
        self._field = RouteFilter(route.field, frozenset())
        self._letters = route.unmatched is Unmatched.DEAD_LETTER
        self._refused: dict[str, tuple[str, str] | None] = {}
        self.found = TopicValues(Counter(), [])

    def record(self, partition: int, offset: int, value: bytes | None) -> None:
        found = json_object(value) if value is not None else None
        if found is None:
            why = json_problem(value) if value is not None else None
            if why is None:  # a null value, or text Spark may read: Spark's pass judges the topic
                self.found.unsure = True
            else:  # not decoded: a dead letter whatever the rule says
                self.found.letters.append(Letter(self._topic, partition, offset, *why))
            return
        # Connect JSON: Spark's pass reads the field in the payload, by its schema.
        spelled = False if "schema" in found and "payload" in found else self._field.spelled(found)
        if spelled is False:
            self.found.unsure = True
        elif spelled is None:
            self._letter(partition, offset, self._route.no_value)
        else:
            refused = self._refusal(spelled)
            if refused is None:
                self.found.values[spelled] += 1
            else:
                self._letter(partition, offset, refused)

    def _refusal(self, value: str) -> tuple[str, str] | None:
        if value not in self._refused:
            targets = self._route.targets(value, self._reserved)
            self._refused[value] = (targets[0], str(targets[1])) if isinstance(targets[0], str) else None
        return self._refused[value]

    def _letter(self, partition: int, offset: int, why: tuple[str, str]) -> None:
        if self._letters:
            self.found.letters.append(Letter(self._topic, partition, offset, "route", *why))


def judged(
    batches: Iterator[pa.RecordBatch], routes: Mapping[str, Route], reserved: TableRef
) -> dict[str, TopicValues]:  # fmt: skip
    """Each topic's values, letters and whether it is unsure, from records (topic, partition,
    offset, value)."""
    judges: dict[str, _Judge] = {}
    for batch in batches:
        columns = [batch.column(n).to_pylist() for n in ("topic", "partition", "offset", "value")]
        for topic, partition, offset, value in zip(*columns, strict=True):
            judge = judges.get(topic)
            if judge is None:
                judge = judges[topic] = _Judge(topic, routes[topic], reserved)
            if not judge.found.unsure:
                judge.record(partition, offset, value)
    return {topic: judge.found for topic, judge in judges.items()}


def route_fn(  # type: ignore[no-untyped-def]
    routes: Mapping[str, Route], reserved: TableRef, shares: list[list[PartitionRange]], settings: dict[str, Any]
):  # fmt: skip
    """The function handed to DataFrame.mapInArrow: a task's share indexes in, `ROUTE_DDL` rows out.
    A share librdkafka does not read to its end makes every topic unsure."""

    def run(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        mine = [i for b in tasks for i in b.column("id").to_pylist()]
        kafka = reader.RangeReader(settings)
        try:
            found = judged((b for i in mine for b in kafka.batches(shares[i])), routes, reserved)
        except reader.RangeReadError as e:
            log.warning("the routing pass could not read its records with librdkafka: %s", e)
            found = {topic: TopicValues(Counter(), [], unsure=True) for topic in routes}
        yield from _rows(found)

    return run


def _rows(found: Mapping[str, TopicValues]) -> Iterator[pa.RecordBatch]:
    rows: list[tuple[Any, ...]] = []
    for topic, f in found.items():
        rows += [(topic, v, n, None, None, None, None, None, False) for v, n in f.values.items()]
        rows += [(x.topic, None, None, x.partition, x.offset, x.stage, x.error_class, x.message, False)
                 for x in f.letters]  # fmt: skip
        rows += [(topic, None, None, None, None, None, None, None, True)] if f.unsure else []
    if not rows:
        return
    names = ["topic", "value", "records", "partition", "offset", "stage", "error_class", "message", "unsure"]
    types = [pa.string(), pa.string(), pa.int64(), pa.int32(), pa.int64(), pa.string(), pa.string(), pa.string(),
             pa.bool_()]  # fmt: skip
    yield pa.RecordBatch.from_arrays(
        [pa.array(list(c), t) for c, t in zip(zip(*rows, strict=True), types, strict=True)], names=names
    )
