"""The routing pass of field-routed plain JSON topics in Python tasks (tasks/route_values.py), not
through Spark's decoder: one Spark job whose tasks read the topics' records with librdkafka and say,
per topic, which values of the field its records hold and which records no table takes (their dead
letters, worded as Spark's pass words them). batch/route.py then routes those topics by these
values, as it routes by the values Spark's pass collects.

Only where the tasks judge every record as Spark's pass would: plain JSON values (no envelope, no
Connect schemas met), the one-pass job on (`decode.direct_json`) and librdkafka reading, bad
records dead-lettered (`decode.on_error`), and no rule that asks the catalog whether a dynamic
table exists (`unknown_tables: dead-letter`). A topic a task is unsure of takes Spark's pass.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence

from icesink.batch.context import BatchContext
from icesink.batch.decode.json import JsonDecoder
from icesink.batch.route import TopicRouting
from icesink.config import ErrorPolicy, UnknownTables, ValueFormat
from icesink.kafka import reader
from icesink.model import PartitionRange
from icesink.routing import Route
from icesink.tasks.dead_letters import Letter
from icesink.tasks.route_values import ROUTE_DDL, route_fn

log = logging.getLogger(__name__)

# Records per task of the routing pass (it reads and parses, no more: see direct.RECORDS_PER_TASK).
RECORDS_PER_TASK = 20_000


def routes_in_tasks(ctx: BatchContext, ranges: Sequence[PartitionRange]) -> dict[str, Route]:
    """The field-routed topics of `ranges` the tasks can route, and their routes."""
    config, decoder = ctx.config, ctx.decoder
    if (
        ctx.librdkafka is None
        or config.decode.format is not ValueFormat.JSON
        or not config.decode.direct_json
        or config.decode.on_error is ErrorPolicy.FAIL
        or not isinstance(decoder, JsonDecoder)
        or decoder.envelope is not None
        or decoder.connect
    ):
        return {}
    routes = {r.tp.topic: ctx.router.route(r.tp.topic) for r in ranges}
    return {
        topic: route
        for topic, route in sorted(routes.items())
        if route.field is not None and not (route.dynamic and route.unknown_tables is UnknownTables.DEAD_LETTER)
    }


def route_in_tasks(ctx: BatchContext, ranges: Sequence[PartitionRange], batch_id: int) -> dict[str, TopicRouting]:
    """The routing of the field-routed topics the tasks can route and were sure of (the others:
    Spark's pass)."""
    routes = routes_in_tasks(ctx, ranges)
    if not routes:
        return {}
    read = [r for r in ranges if r.tp.topic in routes]
    records = sum(r.records for r in read)
    n_tasks = max(1, min(ctx.spark.sparkContext.defaultParallelism, records // RECORDS_PER_TASK))
    shares = reader.split(read, n_tasks, whole=False)
    assert ctx.librdkafka is not None
    fn = route_fn(routes, ctx.dead_letter_ref, shares, ctx.librdkafka)
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
            "would (a null value, lenient JSON, a field value spelled otherwise): routed through Spark's decoder",
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
