"""How a field-routed topic's records are routed, judged a record (JSON) or a batch (Avro) at a
time in a Python task as Spark's routing pass routes them (batch/route.py): per topic the field's
values met (and how many records held each), the dead letters of the records no table takes (a
plain JSON value that is not JSON beyond doubt: tasks/dead_letters.json_problem; a record without
the field's value; a value the rule refuses: icesink/routing.py), each worded as Spark's pass
words it, or "unsure": a record the tasks cannot judge as Spark's decoder would (a null value,
text Spark's lenient parser may read, a value it would spell otherwise: tasks/routing.py; an Avro
record of another writer schema, or one that does not decode).

The routing pass's tasks judge (tasks/route_values.py), and so do the one-pass job's when the
batch was planned with the values its topics held before (batch/route_guess.py: `Judging`), their
findings one value of a result row (`routing_blob`, `routing_of`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from icesink.model import TableRef
from icesink.modes import Unmatched
from icesink.routing import Route
from icesink.tasks.dead_letters import Letter, json_problem
from icesink.tasks.decode_avro import AvroRows, DirectAvro
from icesink.tasks.routing import RouteFilter, json_object_once, routable, spelled_column
from icesink.tasks.shared_decode import decoded_of
from icesink.tasks.table_out import NAMED


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
        self._avro: AvroRows | None = None

    def record(self, partition: int, offset: int, value: bytes | None) -> None:
        """A plain JSON record (parsed once for the one-pass job's tables that look at it too)."""
        found = json_object_once(value) if value is not None else None
        if found is None:
            why = json_problem(value) if value is not None else None
            if why is None:  # a null value, or text Spark may read: Spark's pass judges the topic
                self._unsure()
            else:  # not decoded: a dead letter whatever the rule says
                self.found.letters.append(Letter(self._topic, partition, offset, *why))
            return
        # Connect JSON: Spark's pass reads the field in the payload, by its schema.
        spelled = False if "schema" in found and "payload" in found else self._field.spelled(found)
        if spelled is False:
            self._unsure()
        else:
            self._routed(partition, offset, spelled)

    def _unsure(self) -> None:
        """Spark's pass judges the topic: what the task found of it is no use (dropped, so that
        the findings do not depend on which records were judged before)."""
        self.found = TopicValues(Counter(), [], unsure=True)

    def counted(self, spelled: pa.Array, partitions: pa.Array, offsets: pa.Array) -> None:
        """Plain JSON records whose field's values (`spelled`, none null) their tables read a batch
        at a time (tasks/json_batches.py): each as `record` judges it."""
        for value, count in zip(*pc.value_counts(spelled).flatten(), strict=True):
            refused = self._refusal(value.as_py())
            if refused is None:
                self.found.values[value.as_py()] += count.as_py()
            elif self._letters:
                self._all(pa.table({"p": partitions, "o": offsets}).filter(pc.equal(spelled, value)), refused)

    def avro(self, batch: pa.RecordBatch, topic: AvroTopic) -> None:
        """A batch of Avro records, decoded with the writer schemas the topic was planned with
        (any other record, or one that does not decode: Spark's pass judges the topic)."""
        if self._counted(batch, topic):
            return
        if self._avro is None:
            self._avro = AvroRows(topic.direct, topic.schema)
        carry = pa.table({"partition": batch.column("partition"), "offset": batch.column("offset")})
        named = batch.column(NAMED) if NAMED in batch.schema.names else None
        try:
            rows = self._avro.decode(batch.column("value"), named, carry)
        except (pa.ArrowException, UnicodeError, OverflowError, ValueError):
            rows = None
        if rows is None:
            self._unsure()
            return
        # By position after the two carried columns: the field may be named partition or offset.
        column = rows.column(2 + rows.column_names[2:].index(self._field.field))
        spelled = spelled_column(column)
        for value, count in zip(*pc.value_counts(spelled.drop_null()).flatten(), strict=True):
            refused = self._refusal(value.as_py())
            if refused is None:
                self.found.values[value.as_py()] += count.as_py()
            elif self._letters:
                self._all(rows.filter(pc.equal(spelled, value)), refused)
        if spelled.null_count and self._letters:
            self._all(rows.filter(pc.is_null(spelled)), self._route.no_value)

    def _counted(self, batch: pa.RecordBatch, topic: AvroTopic) -> bool:
        """Whether the values of `batch` were counted from the rows a table of the topic decoded of
        it with the same writer schemas (tasks/shared_decode.py): when every value routes the
        record somewhere (a letter needs the record's offset, which those rows do not carry)."""
        frames = frozenset(w.frame for w in topic.direct.writers)
        for rows in decoded_of(batch, frames):
            if self._field.field not in rows.column_names or not routable(rows.schema.field(self._field.field).type):
                continue
            column = rows.column(self._field.field)
            spelled = spelled_column(column)
            if spelled.null_count and self._letters:
                return False
            counts = pc.value_counts(spelled.drop_null()).flatten()
            found = [(v.as_py(), n.as_py()) for v, n in zip(*counts, strict=True)]
            refused = {v for v, _ in found if self._refusal(v) is not None}
            if refused and self._letters:
                return False
            for value, n in found:
                if value not in refused:
                    self.found.values[value] += n
            return True
        return False

    def _all(self, rows: pa.Table, why: tuple[str, str]) -> None:
        for partition, offset in zip(rows.column(0).to_pylist(), rows.column(1).to_pylist(), strict=True):
            self._letter(partition, offset, why)

    def _routed(self, partition: int, offset: int, spelled: str | None) -> None:
        """A record whose field holds `spelled` (None: no value)."""
        if spelled is None:
            self._letter(partition, offset, self._route.no_value)
            return
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


@dataclass(frozen=True)
class AvroTopic:
    """How the routing pass decodes a field-routed Avro topic's records: the writer schemas it was
    planned with, and their merged rows' Arrow schema (batch/route_tasks.py)."""

    direct: DirectAvro
    schema: pa.Schema


@dataclass(frozen=True)
class Judging:
    """What the one-pass job's tasks judge besides writing the tables: the field-routed topics
    whose batch was planned with the values they held before (batch/route_guess.py). Pickled."""

    routes: Mapping[str, Route]
    reserved: TableRef
    avro: Mapping[str, AvroTopic] | None = None

    def judges(self) -> Judges:
        return Judges(self.routes, self.reserved, self.avro)


class Judges:
    """The judges of a task's field-routed topics, each topic's records as they come."""

    def __init__(
        self, routes: Mapping[str, Route], reserved: TableRef, avro: Mapping[str, AvroTopic] | None = None
    ) -> None:
        self._routes, self._reserved, self._avro = routes, reserved, avro or {}
        self._judges: dict[str, _Judge] = {}

    def _judge(self, topic: str) -> _Judge:
        if topic not in self._judges:
            self._judges[topic] = _Judge(topic, self._routes[topic], self._reserved)
        return self._judges[topic]

    @property
    def avro(self) -> bool:
        return bool(self._avro)

    def batch(self, batch: pa.RecordBatch) -> None:
        """The records of `batch` (topic, partition, offset, value; for Avro, the schema-id
        header's value) of the judged topics."""
        topics = batch.column("topic")
        if self._avro:
            found = pc.unique(topics).to_pylist()
            for topic in found:
                if topic in self._routes and not self._judge(topic).found.unsure:
                    # A batch of one topic as it is: the rows its tables decoded of it may be shared.
                    mine = batch if len(found) == 1 else batch.filter(pc.equal(topics, topic))
                    self._judge(topic).avro(mine, self._avro[topic])
            return
        columns = [batch.column(n).to_pylist() for n in ("topic", "partition", "offset", "value")]
        for topic, partition, offset, value in zip(*columns, strict=True):
            self.record(topic, partition, offset, value)

    def record(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        """A plain JSON record (of any topic: those not judged are passed over)."""
        if topic in self._routes:
            mine = self._judge(topic)
            if not mine.found.unsure:
                mine.record(partition, offset, value)

    def judges(self, topic: str) -> bool:
        """Whether the topic's records are judged (a field-routed topic's)."""
        return topic in self._routes

    def counted(self, topic: str, spelled: pa.Array, partitions: pa.Array, offsets: pa.Array) -> None:
        """Plain JSON records of `topic` read a batch at a time (`_Judge.counted`), their field
        the topic's rule's."""
        if topic in self._routes:
            mine = self._judge(topic)
            if not mine.found.unsure:
                mine.counted(spelled, partitions, offsets)

    @property
    def found(self) -> dict[str, TopicValues]:
        return {topic: j.found for topic, j in self._judges.items()}


def routing_blob(found: Mapping[str, TopicValues]) -> bytes:
    """A task's findings as one value of its result row (the one-pass job's, tasks/one_pass.py)."""
    return orjson.dumps({topic: [dict(f.values), [list(x) for x in f.letters], f.unsure] for topic, f in found.items()})


def routing_of(blobs: Iterable[bytes]) -> dict[str, TopicValues]:
    """The findings of every task (`routing_blob`), per topic."""
    out: dict[str, TopicValues] = {}
    for blob in blobs:
        for topic, (values, letters, unsure) in orjson.loads(blob).items():
            mine = out.setdefault(topic, TopicValues(Counter(), []))
            mine.values.update(values)
            mine.letters.extend(Letter(*x) for x in letters)
            mine.unsure = mine.unsure or unsure
    return out
