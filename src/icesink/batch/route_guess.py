"""Field-routed topics planned without a routing pass: with the values their records held before.

The routing pass (batch/route_tasks.py) reads and decodes a field-routed topic's batch once more
before the one-pass job does: at 300,000 records, 0.7-0.9 s of a 1.9-2.6 s batch. A topic's values
seldom change from batch to batch (a table per event type, per tenant), so a batch is planned with
the values the topic held in the job's last batches (batch/routed_before.py), or, for a topic the
job has not routed yet, those of a sample of its first records (read and judged on the driver).
The one-pass job's tasks then judge every record of the topic as the routing pass would, beside
writing the tables (tasks/route_judges.Judging), and the driver checks the guess:

- the tasks met only values the batch was planned with: their findings are the routing; their
  dead letters are written, and the tables planned for values they did not meet are neither
  created nor committed (as the routing pass would not have planned them);
- they met another value, or a record they cannot judge as Spark's decoder would, or did not
  judge every record (no one-pass job ran, a task did not read Kafka): the guess is refuted.
  Nothing of the batch is committed (the files written are orphans), and it is planned again with
  what the tasks found, which is what the routing pass would have found, or by the routing pass.

Only where the routing pass runs in the tasks (route_tasks.routes_in_tasks) for every field-routed
topic of the batch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from icesink.batch.context import BatchContext
from icesink.batch.direct_avro import header_columns
from icesink.batch.route import Targets, TopicRouting
from icesink.batch.route_tasks import route_in_tasks, routes_in_tasks
from icesink.batch.sources import heads
from icesink.kafka import reader
from icesink.model import PartitionRange, TableRef
from icesink.runtime import faults
from icesink.tasks.route_judges import Judging, TopicValues
from icesink.tasks.route_values import judged

log = logging.getLogger(__name__)

# Records of each topic-partition of a topic the job has not routed yet whose values plan its batch.
SAMPLE_RECORDS = 500


@dataclass(frozen=True)
class RouteGuess:
    """The values a batch's field-routed topics are planned with, and how the one-pass job's tasks
    judge those topics' records (`ranges`: the batch's, which the job reads whole)."""

    values: Mapping[str, frozenset[str]]
    judging: Judging
    ranges: Sequence[PartitionRange]

    @property
    def routing(self) -> dict[str, TopicRouting]:
        """The routing the batch is planned with (the dead letters come from the tasks)."""
        return {topic: TopicRouting(values, ()) for topic, values in self.values.items()}

    def refuted(self, found: Mapping[str, TopicValues] | None) -> str | None:
        """Why the tasks' findings refute the guess, or None when they hold it."""
        if found is None:
            return "the one-pass job's tasks did not judge all of their records"
        for topic, f in sorted(found.items()):
            if f.unsure:
                return f"topic {topic} holds a record the tasks cannot judge as Spark's decoder would"
            new = sorted(set(f.values) - self.values.get(topic, frozenset()))
            if new:
                shown = ", ".join(repr(v) for v in new[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
                field = self.judging.routes[topic].field
                return f"topic {topic} holds value(s) {shown} of field {field} the batch was not planned with"
        return None

    def unmet(self, found: Mapping[str, TopicValues], targets: Targets) -> set[TableRef]:
        """The tables planned for values no record of the batch holds."""
        met: set[TableRef] = set()
        for topic, f in found.items():
            route = self.judging.routes[topic]
            for value in f.values:
                met |= {ref for ref in route.targets(value, self.judging.reserved) if isinstance(ref, TableRef)}
        return {ref for ref in targets.field_routes if ref not in targets.fixed_tables and ref not in met}


def guess_held(
    ctx: BatchContext, batch_id: int, targets: Targets, guess: RouteGuess, found: Mapping[str, TopicValues]
) -> set[TableRef]:  # fmt: skip
    """The guess held: the tasks' dead letters are the routing's (`targets`), the values they met
    are learnt. Returns the tables planned for values they did not meet (left out)."""
    targets.unrouted_letters = {topic: tuple(f.letters) for topic, f in found.items()}
    ctx.routed_before.learn(batch_id, {topic: f.values for topic, f in found.items()})
    unmet = guess.unmet(found, targets)
    log.info(
        "batch %d: %d field-routed topic(s) routed in the one-pass job (%d value(s), %d dead letter(s)); %d table(s) "
        "planned for values not met", batch_id, len(found), sum(len(f.values) for f in found.values()),
        sum(len(f.letters) for f in found.values()), len(unmet),
    )  # fmt: skip
    return unmet


def routing_again(
    ctx: BatchContext, ranges: Sequence[PartitionRange], batch_id: int, guess: RouteGuess, refuted: str,
    found: Mapping[str, TopicValues] | None,
) -> dict[str, TopicRouting]:  # fmt: skip
    """The guess refuted: the routing the tasks found (the topics they were unsure of: Spark's
    pass), or the routing pass's when they did not judge every record; the topics that could not
    be judged are not guessed for a while (batch/routed_before.py)."""
    log.info("batch %d: %s: planned again (the files written are not committed)", batch_id, refuted)
    faults.maybe_kill("guess-refuted", batch_id, ctx.spark)
    if found is None:
        ctx.routed_before.hold_off(guess.values, batch_id)
        again = route_in_tasks(ctx, ranges, batch_id)
    else:
        # A topic of records the tasks cannot judge likely holds more: not guessed for a while.
        ctx.routed_before.hold_off([t for t, f in found.items() if f.unsure], batch_id)
        again = {t: TopicRouting(frozenset(f.values), tuple(f.letters)) for t, f in found.items() if not f.unsure}
    ctx.routed_before.learn(batch_id, {topic: r.values for topic, r in again.items()})
    return again


def guess_routing(ctx: BatchContext, ranges: Sequence[PartitionRange], batch_id: int) -> RouteGuess | None:
    """The batch's field-routed topics planned with the values they held before, or None (the
    routing pass routes them)."""
    topics = {r.tp.topic for r in ranges if ctx.router.route(r.tp.topic).field is not None}
    if not topics or any(ctx.routed_before.held_off(t, batch_id) for t in topics):
        return None
    routes, avro = routes_in_tasks(ctx, ranges)
    if set(routes) != topics:
        return None
    judging = Judging(routes, ctx.dead_letter_ref, avro or None)
    mine = [r for r in ranges if r.tp.topic in topics]
    values: dict[str, frozenset[str] | None] = {t: ctx.routed_before.values(t, batch_id) for t in sorted(topics)}
    new = {t for t, v in values.items() if v is None}
    if new:
        sampled = _sampled(ctx, [r for r in mine if r.tp.topic in new], judging)
        if sampled is None:
            return None
        values.update(sampled)
    planned = {t: v for t, v in values.items() if v is not None}
    log.info(
        "batch %d: field-routed topic(s) %s planned with the values met before or in a sample (%s); the one-pass "
        "job's tasks route their records",
        batch_id, ", ".join(sorted(topics)), "; ".join(f"{t}: {len(v)} value(s)" for t, v in sorted(planned.items())),
    )  # fmt: skip
    return RouteGuess(planned, judging, mine)


def _sampled(ctx: BatchContext, ranges: Sequence[PartitionRange], judging: Judging) -> dict[str, frozenset[str]] | None:
    """The values of the first `SAMPLE_RECORDS` records of each of `ranges`, judged on the driver;
    None when librdkafka cannot read them or a record cannot be judged."""
    if ctx.librdkafka is None:
        return None
    sample = heads(ranges, SAMPLE_RECORDS)
    try:
        batches = reader.RangeReader({**ctx.librdkafka, **reader.DRIVER_READS}).batches(
            sample, header_columns(bool(judging.avro))
        )
        found = judged(batches, judging.routes, judging.reserved, judging.avro)
    except reader.RangeReadError as e:
        log.info("field-routed topics: a sample of their records could not be read with librdkafka: %s", e)
        return None
    if any(f.unsure for f in found.values()):
        return None
    topics = {r.tp.topic for r in ranges}
    return {t: frozenset(found[t].values) if t in found else frozenset() for t in topics}
