"""The routing pass of field-routed topics in Python tasks (tasks/route_values.py), not through
Spark's decoder: one Spark job whose tasks read the topics' records with librdkafka and say, per
topic, which values of the field its records hold and which records no table takes (their dead
letters, worded as Spark's pass words them). batch/route.py then routes those topics by these
values, as it routes by the values Spark's pass collects.

Only where the tasks judge every record as Spark's pass would: plain JSON values (no envelope, no
Connect schemas met) or Avro records (no envelope) of the writer schemas the topic is planned with
(batch/seen_schemas.py, or the registry's latest) whose merged rows hold the field as a string,
an integer or a boolean; the one-pass job on (`decode.direct_json`, `decode.direct_avro`) and
librdkafka reading; bad records dead-lettered (`decode.on_error`); and no rule that asks the
catalog whether a dynamic table exists (`unknown_tables: dead-letter`). A topic a task is unsure
of (an Avro record that does not decode so, a null value, lenient JSON) takes Spark's pass.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type

from icesink.batch.context import BatchContext
from icesink.batch.decode.avro import AvroDecoder
from icesink.batch.decode.json import JsonDecoder
from icesink.batch.direct_avro import direct_avro, header_columns, merged_rows
from icesink.batch.route import TopicRouting
from icesink.config import ErrorPolicy, UnknownTables, ValueFormat
from icesink.kafka import reader
from icesink.model import PartitionRange
from icesink.routing import Route
from icesink.tasks.dead_letters import Letter
from icesink.tasks.route_judges import AvroTopic
from icesink.tasks.route_values import ROUTE_DDL, route_fn
from icesink.tasks.routing import routable

log = logging.getLogger(__name__)

# Records per task of the routing pass (it reads and parses, no more: see direct.RECORDS_PER_TASK).
RECORDS_PER_TASK = 20_000


def routes_in_tasks(
    ctx: BatchContext, ranges: Sequence[PartitionRange]
) -> tuple[dict[str, Route], dict[str, AvroTopic]]:
    """The field-routed topics of `ranges` the tasks can route, their routes, and how their Avro
    records decode (none for JSON)."""
    if ctx.librdkafka is None or ctx.config.decode.on_error is ErrorPolicy.FAIL or not _decoded_in_tasks(ctx):
        return {}, {}
    routes = {r.tp.topic: ctx.router.route(r.tp.topic) for r in ranges}
    routes = {
        topic: route
        for topic, route in sorted(routes.items())
        if route.field is not None and not (route.dynamic and route.unknown_tables is UnknownTables.DEAD_LETTER)
    }
    if not isinstance(ctx.decoder, AvroDecoder):
        return routes, {}
    avro = {topic: _avro_topic(ctx, topic, route) for topic, route in routes.items()}
    found = {topic: a for topic, a in avro.items() if a is not None}
    return {topic: routes[topic] for topic in found}, found


def _decoded_in_tasks(ctx: BatchContext) -> bool:
    """Whether the tasks read the values as Spark's decoder does: plain JSON, or Avro, without an envelope."""
    config, decoder = ctx.config, ctx.decoder
    if isinstance(decoder, JsonDecoder):
        json = config.decode.format is ValueFormat.JSON and config.decode.direct_json
        return json and decoder.envelope is None and not decoder.connect
    return isinstance(decoder, AvroDecoder) and config.decode.direct_avro and decoder.envelope is None


def _avro_topic(ctx: BatchContext, topic: str, route: Route) -> AvroTopic | None:
    """How the tasks decode the topic's records: the writer schemas it is planned with, when their
    merged rows hold the routing field as a string, an integer or a boolean."""
    decoder = ctx.decoder
    assert isinstance(decoder, AvroDecoder)
    assert route.field is not None
    frames = decoder.guess(ctx.seen.expected("value", [topic]), None, [topic])
    writers = decoder.writer_schemas(frames) if frames is not None else None
    rows = merged_rows(writers) if writers else None
    if writers is None or rows is None or route.field not in rows.fieldNames():
        return None
    if not routable(to_arrow_type(rows[route.field].dataType)):
        return None
    direct = direct_avro(writers, rows)
    if direct is None:
        return None
    return AvroTopic(direct, pa.schema([pa.field(f.name, to_arrow_type(f.dataType)) for f in rows.fields]))


def route_in_tasks(ctx: BatchContext, ranges: Sequence[PartitionRange], batch_id: int) -> dict[str, TopicRouting]:
    """The routing of the field-routed topics the tasks can route and were sure of (the others:
    Spark's pass)."""
    routes, avro = routes_in_tasks(ctx, ranges)
    if not routes:
        return {}
    read = [r for r in ranges if r.tp.topic in routes]
    records = sum(r.records for r in read)
    n_tasks = max(1, min(ctx.spark.sparkContext.defaultParallelism, records // RECORDS_PER_TASK))
    shares = reader.split(read, n_tasks, whole=False)
    assert ctx.librdkafka is not None
    fn = route_fn(routes, ctx.dead_letter_ref, shares, ctx.librdkafka, avro, header_columns(bool(avro)))
    rows = ctx.spark.range(0, len(shares), 1, len(shares)).mapInArrow(fn, ROUTE_DDL).collect()
    values: dict[str, set[str]] = defaultdict(set)
    letters: dict[str, list[Letter]] = defaultdict(list)
    unsure = set()
    for r in rows:
        if r.unsure:
            unsure.add(r.topic)
        elif r.value is not None:
            values[r.topic].add(r.value)
        else:
            letters[r.topic].append(Letter(r.topic, r.partition, r.offset, r.stage, r.error_class, r.message))
    if unsure:
        log.info(
            "batch %d: topic(s) %s: a record the routing pass in the Python tasks cannot judge as Spark's decoder "
            "would (a null value, lenient JSON, a field value spelled otherwise, an Avro record of another writer "
            "schema or that does not decode): routed through Spark's decoder",
            batch_id, ", ".join(sorted(unsure)),
        )  # fmt: skip
    found = {
        topic: TopicRouting(frozenset(values[topic]), tuple(letters[topic])) for topic in routes if topic not in unsure
    }
    log.info(
        "batch %d: %d field-routed topic(s) routed in the Python tasks (%d record(s), %d value(s), %d dead letter(s))",
        batch_id, len(found), records, sum(len(f.values) for f in found.values()),
        sum(len(f.letters) for f in found.values()),
    )  # fmt: skip
    return found
