"""The routing pass of field-routed topics in Python tasks (batch/route_tasks.py): each task reads
its share of the topics' records with librdkafka and returns, per topic, the field's values it met
(and how many records held each), and the dead letters of the records no table takes: a plain JSON
value that is not JSON beyond doubt (tasks/dead_letters.json_problem), a record without the
field's value, or a value the rule refuses (icesink/routing.py), each worded as Spark's routing
pass words it (batch/route.py). Avro records are decoded with the writer schemas the topic was
planned with (tasks/decode_avro.py).

A topic where a task meets a record it cannot judge as Spark's decoder would (a null value, text
Spark's lenient parser may read, a value it would spell otherwise: tasks/routing.py; an Avro
record of another writer schema, or one that does not decode) is reported unsure, and the driver
routes that topic with Spark's pass instead.

The judges are tasks/route_judges.py's (the one-pass job's tasks run them too).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from icesink.kafka import reader
from icesink.model import PartitionRange, TableRef
from icesink.routing import Route
from icesink.tasks.route_judges import AvroTopic, Judges, TopicValues
from icesink.tasks.worker_imports import freeze_imports, keep_zip_directories

log = logging.getLogger(__name__)

# A row per (topic, value) met, per letter, and per topic a task could not judge (`unsure`).
ROUTE_DDL = (
    "topic string, value string, records long, partition int, offset long, stage string, error_class string, "
    "message string, unsure boolean"
)


def judged(
    batches: Iterator[pa.RecordBatch], routes: Mapping[str, Route], reserved: TableRef,
    avro: Mapping[str, AvroTopic] | None = None,
) -> dict[str, TopicValues]:  # fmt: skip
    """Each topic's values, letters and whether it is unsure, from records (topic, partition,
    offset, value; for Avro, the schema-id header's value). `avro`: how each topic's Avro
    records decode (else they are plain JSON)."""
    judges = Judges(routes, reserved, avro)
    for batch in batches:
        judges.batch(batch)
    return judges.found


def route_fn(  # type: ignore[no-untyped-def]
    routes: Mapping[str, Route], reserved: TableRef, shares: list[list[PartitionRange]], settings: dict[str, Any],
    avro: Mapping[str, AvroTopic] | None = None, headers: Mapping[str, str] | None = None,
):  # fmt: skip
    """The function handed to DataFrame.mapInArrow: a task's share indexes in, `ROUTE_DDL` rows out.
    A share librdkafka does not read to its end makes every topic unsure. `headers`: the schema-id
    headers the reader keeps, by column (batch/direct_avro.header_columns)."""

    def run(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        keep_zip_directories()
        freeze_imports()
        mine = [i for b in tasks for i in b.column("id").to_pylist()]
        kafka = reader.RangeReader(settings)
        try:
            records = (b for i in mine for b in kafka.batches(shares[i], headers))
            found = judged(records, routes, reserved, avro)
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
