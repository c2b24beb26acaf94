"""Which records of a batch each table takes, by the routing rules (icesink/routing.py).

Topics routed to fixed tables need nothing per record. Topics routed by a field are decoded once
to read that field (the decoder's own schema for the batch), and each record goes to the tables
its value names: static values, or the value itself as a table name (dynamic). A record no table
takes is a dead letter (stage `route`), or skipped if the rule says so; a record that does not
decode is always a dead letter. The values a topic's records hold come from the Python tasks'
routing pass where they can judge the records (batch/route_tasks.py: one Spark job for all such
topics, their dead letters from the tasks too), else from Spark's decoder here (Spark expressions
plus one small collect per field-routed topic).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from icesink.batch.decode import ERROR, ERROR_TYPE, ROW, Decoder, error
from icesink.config import UnknownTables, Unmatched
from icesink.model import PartitionRange, TableRef
from icesink.routing import Route, Router
from icesink.tasks.dead_letters import Letter

ROUTE = "__icesink_route"  # the routing field's value, as a string
ROUTE_ERROR = "__icesink_route_error"  # the record's decode error in the routing pass


@dataclass(frozen=True)
class TopicRouting:
    """A field-routed topic's routing as the Python tasks found it (batch/route_tasks.py): the
    values its records hold, and the dead letters of the records no table takes."""

    values: frozenset[str]
    letters: tuple[Letter, ...]


@dataclass
class Targets:
    batch: DataFrame  # the micro-batch's records
    ranges: dict[TableRef, list[PartitionRange]] = field(default_factory=dict)
    unrouted: list[tuple[str, DataFrame]] = field(default_factory=list)  # (topic, records with ERROR) to dead-letter
    topic_routed: set[TableRef] = field(default_factory=set)  # tables that take whole topics only (no field routing)
    persisted: list[DataFrame] = field(default_factory=list)
    # Topics routed whole, and the tables' conditions on field-routed topics' records (`routed`).
    # `source` and `conditions` are Spark plans built from them only when Spark's path reads the
    # batch: the one-pass job, which takes most batches, needs neither (their py4j calls cost a
    # small batch ~15 ms).
    fixed: list[str] = field(default_factory=list)
    fixed_tables: dict[TableRef, list[str]] = field(default_factory=dict)
    routed: list[DataFrame] = field(default_factory=list)
    field_conditions: dict[TableRef, list[Column]] = field(default_factory=dict)
    # Per table of field-routed topics: each such topic, its route and the field's values the table
    # takes of it (the one-pass job's tasks route by them: batch/direct_routing.py).
    field_routes: dict[TableRef, list[tuple[str, Route, tuple[str, ...]]]] = field(default_factory=dict)
    # Field-routed topics routed by the values the Python tasks found (batch/route_tasks.py): the
    # dead letters of their records no table takes, and their records with ROUTE for Spark's path,
    # built only if a table of theirs takes it (reading the field there is a Spark decode).
    unrouted_letters: dict[str, tuple[Letter, ...]] = field(default_factory=dict)
    lazy_routed: list[Callable[[], DataFrame]] = field(default_factory=list)

    @functools.cached_property
    def source(self) -> DataFrame:
        """The batch's records, with ROUTE (null for whole topics) and ROUTE_ERROR."""
        frames = list(self.routed) + [read() for read in self.lazy_routed]
        if self.fixed:
            fixed = (
                self.batch.where(F.col("topic").isin(self.fixed))
                .withColumn(ROUTE, F.lit(None).cast(StringType()))
                .withColumn(ROUTE_ERROR, F.lit(None).cast(ERROR_TYPE))
            )
            frames.insert(0, fixed)
        return reduce(lambda a, b: a.unionByName(b), frames) if frames else self.batch

    @functools.cached_property
    def conditions(self) -> dict[TableRef, Column]:
        """Which records of `source` each table takes."""
        parts: dict[TableRef, list[Column]] = defaultdict(list)
        for ref, topics in self.fixed_tables.items():
            parts[ref] += [F.col("topic") == topic for topic in topics]
        for ref, cs in self.field_conditions.items():
            parts[ref] += cs
        return {ref: reduce(lambda a, b: a | b, cs) for ref, cs in parts.items()}


def route_batch(
    batch: DataFrame,
    ranges: list[PartitionRange],
    router: Router,
    decoder: Decoder,
    exists: Callable[[TableRef], bool],
    reserved: TableRef,
    in_tasks: Mapping[str, TopicRouting] | None = None,
) -> Targets:
    """Which records each table takes. `decoder` reads the routing field of field-routed topics
    but those the Python tasks routed (`in_tasks`: their values and dead letters); `exists` tells
    whether a table exists (for `unknown_tables: dead-letter`); no value may route to `reserved`."""
    in_tasks = in_tasks or {}
    by_topic: dict[str, list[PartitionRange]] = defaultdict(list)
    for r in ranges:
        by_topic[r.tp.topic].append(r)
    targets = Targets(batch=batch)
    targets.fixed = sorted(t for t in by_topic if router.route(t).field is None)
    table_ranges: dict[TableRef, list[PartitionRange]] = defaultdict(list)
    fixed_tables: dict[TableRef, list[str]] = defaultdict(list)
    for topic in targets.fixed:
        for ref in router.route(topic).tables:
            fixed_tables[ref].append(topic)
            table_ranges[ref].extend(by_topic[topic])
    by_field: dict[TableRef, list[Column]] = defaultdict(list)  # tables that take records of a field-routed topic
    field_routes: dict[TableRef, list[tuple[str, Route, tuple[str, ...]]]] = defaultdict(list)
    for topic in sorted(set(by_topic) - set(targets.fixed)):
        route = router.route(topic)
        assert route.field is not None
        records = batch.where(F.col("topic") == topic)
        found = in_tasks.get(topic)
        if found is not None:
            targets.lazy_routed.append(functools.partial(read_field, records, route.field, decoder))
            targets.unrouted_letters[topic] = found.letters
            taken, _ = _taken_values(sorted(found.values), route, exists, reserved)
        else:
            routed = read_field(records, route.field, decoder).persist()
            targets.persisted.append(routed)
            targets.routed.append(routed)
            taken, refused = _taken(routed, route, exists, reserved)
        for ref, vs in taken.items():
            by_field[ref].append((F.col("topic") == topic) & F.col(ROUTE).isin(vs))
            field_routes[ref].append((topic, route, tuple(vs)))
            table_ranges[ref].extend(by_topic[topic])
        if found is None:
            accepted = sorted({v for vs in taken.values() for v in vs})
            targets.unrouted.append((topic, _unrouted(routed, route, accepted, refused)))
    targets.ranges = dict(table_ranges)
    targets.fixed_tables = dict(fixed_tables)
    targets.field_conditions = dict(by_field)
    targets.field_routes = dict(field_routes)
    targets.topic_routed = set(table_ranges) - set(by_field)
    return targets


def read_field(records: DataFrame, field: str, decoder: Decoder) -> DataFrame:
    """`records` (one topic) with the routing field's value (ROUTE) and their decode error
    (ROUTE_ERROR). The decoder looks at the records first: every record must be routed now."""
    inspected = decoder.inspect(records)
    parsed = inspected.parse(inspected.schema)
    names = inspected.schema.fieldNames()
    value = F.col(ROW)[field].cast("string") if field in names else F.lit(None).cast("string")
    return parsed.select(*records.columns, value.alias(ROUTE), F.col(ERROR).alias(ROUTE_ERROR))


def _taken(
    routed: DataFrame, route: Route, exists: Callable[[TableRef], bool], reserved: TableRef
) -> tuple[dict[TableRef, list[str]], dict[str, tuple[str, str]]]:
    """The routing field's values (of the records that decoded) each table takes, and why the
    others go nowhere: value -> (error class, message). One small collect."""
    values = [r[0] for r in routed.where(F.col(ROUTE_ERROR).isNull()).select(ROUTE).distinct().collect()]
    return _taken_values(values, route, exists, reserved)


def _taken_values(
    values: Sequence[str | None], route: Route, exists: Callable[[TableRef], bool], reserved: TableRef
) -> tuple[dict[TableRef, list[str]], dict[str, tuple[str, str]]]:
    """`_taken` of the values found."""
    taken: dict[TableRef, list[str]] = defaultdict(list)
    refused: dict[str, tuple[str, str]] = {}
    for v in values:
        if v is None:
            continue
        for target, why in _targets(route, v, exists, reserved):
            if target is not None:
                taken[target].append(v)
            elif why is not None:
                refused[v] = why
    return taken, refused


def _targets(
    route: Route, value: str, exists: Callable[[TableRef], bool], reserved: TableRef
) -> list[tuple[TableRef | None, tuple[str, str] | None]]:
    """(table, None) for each table a value routes to, or (None, (error class, message)) if none."""
    found = route.targets(value, reserved)
    if isinstance(found[0], str):
        return [(None, (found[0], str(found[1])))]
    refs = [ref for ref in found if isinstance(ref, TableRef)]
    if route.dynamic and route.unknown_tables is UnknownTables.DEAD_LETTER and not exists(refs[0]):
        return [(None, ("UnknownTable", f"table {refs[0]} does not exist (routing unknown_tables: dead-letter)"))]
    return [(ref, None) for ref in refs]


def _unrouted(routed: DataFrame, route: Route, accepted: list[str], refused: dict[str, tuple[str, str]]) -> DataFrame:
    """The records of a field-routed topic no table takes, with ERROR set; decode errors always,
    unmatched values unless the rule skips them."""
    value = F.col(ROUTE)
    reason = F.when(F.col(ROUTE_ERROR).isNotNull(), F.col(ROUTE_ERROR))
    if route.unmatched is Unmatched.DEAD_LETTER:
        reason = reason.when(value.isNull(), error("route", *route.no_value))
        for v, (cls, message) in refused.items():
            reason = reason.when(value == v, error("route", cls, message))
        kept = F.col(ROUTE_ERROR).isNotNull() | value.isNull() | ~value.isin(accepted)
    else:
        kept = F.col(ROUTE_ERROR).isNotNull()
    return (
        routed.where(kept)
        .withColumn(ERROR, reason.otherwise(F.lit(None).cast(ERROR_TYPE)))
        .where(F.col(ERROR).isNotNull())
    )
