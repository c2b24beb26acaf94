"""A JSON table's columns as the one-pass job writes them (batch/direct_tables.py), and whether its
records are plain JSON (the tasks' tasks/decode_json.py) or Kafka Connect JSON (their
tasks/decode_connect.py): an existing table's own, a new table's from a sample of the batch.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from icesink.batch.context import BatchContext
from icesink.batch.decode.json import JsonDecoder, Unsure
from icesink.batch.direct_keys import KeySide, with_key_column
from icesink.batch.direct_routing import route_values
from icesink.batch.plan import TablePlan
from icesink.batch.route import Targets
from icesink.batch.sources import heads, own_ranges, read_ranges
from icesink.batch.work import Planned
from icesink.config import IncompatiblePolicy
from icesink.iceberg.jvm import JavaObject
from icesink.kafka import reader
from icesink.model import PartitionRange
from icesink.schema import json_inference
from icesink.tasks.decode_json import json_object
from icesink.tasks.routing import RouteFilter

log = logging.getLogger(__name__)

Item = tuple[TablePlan, JavaObject | None, Planned]

# Records of each topic-partition a new JSON table's columns are found in (`json_schema`).
SAMPLE_RECORDS = 1000
# Of Connect JSON records, whose schemas say their columns: the schemas of the first few do.
CONNECT_SAMPLE = 100
# Of a table that exists, only whether its records are Connect JSON: a few, as the first may be a tombstone.
KNOWN_SAMPLE = 10


def json_schema(
    ctx: BatchContext, targets: Targets, item: Item, key: KeySide | None, decoder: JsonDecoder,
    inferred: StructType | None = None,
) -> tuple[StructType | None, bool]:  # fmt: skip
    """(the table's columns as the one-pass job writes them, or None; whether its records are
    Connect JSON). An existing table: its own columns (Connect JSON, whose tasks take the records
    whose schemas fit it), or its shape (plain JSON, `_plain_schema`). A new table: the columns of a
    sample (the first `SAMPLE_RECORDS` of each of its topic-partitions in the batch, or
    `CONNECT_SAMPLE` of change events), Spark's inference's (of change events without Connect
    schemas: the row of the envelope it infers) or the rows of its Connect schemas.
    Until the job has met Connect schemas, or a sample without them, a sample says which the
    records are (a new table's: once it is not plain JSON). `inferred`: a new plain JSON table's
    columns, inferred already (`share_inferred`), not from a sample."""
    if item[1] is None:
        return _new_table_schema(ctx, targets, item, key, decoder, inferred)
    return _table_schema(ctx, targets, item, key, decoder)


def _new_table_schema(
    ctx: BatchContext, targets: Targets, item: Item, key: KeySide | None, decoder: JsonDecoder,
    inferred: StructType | None,
) -> tuple[StructType | None, bool]:  # fmt: skip
    plain = decoder.envelope is None
    route = routed_by(targets, item)
    if route is not None:  # of field-routed topics: the columns of the table's own records, or Spark's path
        return _routed_new_table(ctx, targets, item, key, decoder, inferred, route), False
    columns = None
    if plain and decoder.connect is not True:
        inferred = inferred if inferred is not None else _inferred_here(ctx, targets, item)
        columns = decoder.plain_columns(inferred, nested=True) if inferred is not None else None
        if columns is not None:
            return with_key_column(columns, key), False
    sample = _sample(ctx, targets, item, SAMPLE_RECORDS if plain else CONNECT_SAMPLE)
    if plain and decoder.connect is not True:
        if inferred is None:  # not inferred here as Spark would: Spark's inference of the sample
            columns = decoder.plain_columns(sample, nested=True)  # None too for Connect JSON
        if columns is not None or decoder.connect is False:
            return with_key_column(columns, key), False
    if decoder.connect is not False:
        row = _connect_rows(ctx, targets, item, decoder, SAMPLE_RECORDS if plain else CONNECT_SAMPLE)
        if decoder.connect:
            return with_key_column(row, key), True
    if not plain and decoder.connect is False:  # change events without Connect schemas
        return with_key_column(decoder.envelope_row(sample), key), False
    return None, False  # Spark's path


def _routed_new_table(
    ctx: BatchContext, targets: Targets, item: Item, key: KeySide | None, decoder: JsonDecoder,
    inferred: StructType | None, route: RouteFilter | str,
) -> StructType | None:  # fmt: skip
    if isinstance(route, str) or decoder.envelope is not None or decoder.connect is True:
        return None
    inferred = inferred if inferred is not None else _inferred_here(ctx, targets, item, route)
    columns = decoder.plain_columns(inferred, nested=True) if inferred is not None else None
    return with_key_column(columns, key) if columns is not None else None


def _table_schema(
    ctx: BatchContext, targets: Targets, item: Item, key: KeySide | None, decoder: JsonDecoder
) -> tuple[StructType | None, bool]:  # fmt: skip
    table = item[1]
    if decoder.connect is None and decoder.envelope is not None:
        _connect_rows(ctx, targets, item, decoder, KNOWN_SAMPLE)  # says whether they are Connect JSON
    if decoder.connect:
        return ctx.catalog.spark_schema(table), True
    if decoder.envelope is not None:
        # Change events without Connect schemas: the table's own columns; not known yet: Spark's path.
        return (ctx.catalog.spark_schema(table) if decoder.connect is False else None), False
    return _plain_schema(ctx, item, key, decoder), False


def connect_key(ctx: BatchContext, targets: Targets, item: Item, key: KeySide) -> KeySide | None:
    """JSON record keys when they are Connect JSON (a sample says, until the job knows), or plain
    JSON (`plain`), with a new table's key column type: the rows of its sample's key schemas, or
    the struct Spark infers from the sample's plain keys. None when the sample does not tell."""
    decoder = ctx.key_decoder
    assert isinstance(decoder, JsonDecoder)
    table = item[1]
    if table is not None and decoder.connect:
        return key
    records = CONNECT_SAMPLE if table is None else KNOWN_SAMPLE
    sampled = table is None or decoder.connect is None
    row = _connect_rows(ctx, targets, item, decoder, records) if sampled and decoder.connect is not False else None
    if decoder.connect is False:
        if table is not None:
            return replace(key, connect=False, plain=True)
        inferred = decoder.plain_columns(_sample(ctx, targets, item, records), nested=True)
        return replace(key, new_type=inferred, connect=False, plain=True) if inferred is not None else None
    if not decoder.connect:
        return None
    if table is not None:
        return key
    return replace(key, new_type=row) if row is not None and row.fields else None


def _plain_schema(ctx: BatchContext, item: Item, key: KeySide | None, decoder: JsonDecoder) -> StructType | None:
    """An existing table of plain JSON: its shape (the guess, made only for plain JSON, no
    envelope, no Connect schemas met, and tables that spell and nest columns as the records do:
    records.guess)."""
    plan, table, planned = item
    # The guess is the table's columns but the key column: the table's own, in its order.
    schema = ctx.catalog.spark_schema(table) if planned.values is not None and key else planned.values
    # A table of nested columns, which Spark's path does not guess (it infers the batch's shape):
    # the one-pass decoder takes only records of exactly the table's columns, as a guess would, and
    # so only where a guess would take conflicting values (records.guess).
    settings = ctx.config.tables.settings_for(plan.table.name)
    if schema is None and decoder.plain and settings.on_incompatible is IncompatiblePolicy.DEAD_LETTER:
        schema = ctx.catalog.spark_schema(table)
    return schema


def _sample(ctx: BatchContext, targets: Targets, item: Item, records: int) -> DataFrame:
    """The first `records` records of each of the table's topic-partitions in the batch. The
    direct decoders take a record only when it is a row of exactly a new table's columns, so a
    batch its sample does not represent (a key, a wider type, another schema only further on) is
    declined and goes Spark's way: the table comes out as it would have."""
    return read_ranges(targets.batch.sparkSession, ctx.config, _sample_ranges(targets, item, records))


def _connect_rows(
    ctx: BatchContext, targets: Targets, item: Item, decoder: JsonDecoder, records: int
) -> StructType | None:
    """`decoder.connect_rows` of the first `records` records of each of the table's
    topic-partitions (whether they are Connect JSON, and the row of their schemas): read by
    librdkafka and their schemas found in this process where it can say, else by a Spark job over
    the sample (one for the values and one for the keys: a new Debezium Connect JSON table's first
    batch planned in 1.9-2.2 s with them, 0.11 s without, on a slow 2-core machine)."""
    ranges = _sample_ranges(targets, item, records)
    values = _read_values(ctx, item, ranges, decoder.column)
    if values is not None:
        found = decoder.connect_rows_of(values)
        if not isinstance(found, Unsure):
            return found
    return decoder.connect_rows(_sample(ctx, targets, item, records))


def _sample_ranges(targets: Targets, item: Item, records: int) -> list[PartitionRange]:
    plan = item[0]
    return heads(own_ranges(plan, targets.ranges[plan.table]), records)


def routed_by(targets: Targets, item: Item) -> RouteFilter | str | None:
    """None for a table of whole topics; else the records it takes of its field-routed topics, or
    why that cannot be said (batch/direct_routing.py)."""
    table = item[0].table
    return None if table in targets.topic_routed else route_values(targets, table)


def _inferred_here(
    ctx: BatchContext, targets: Targets, item: Item, route: RouteFilter | None = None
) -> StructType | None:
    """A new plain JSON table's columns as Spark would infer them from the same sample, read by
    librdkafka and inferred in this process (schema/json_inference.py): no Spark job. None where
    that inference is not sure (Spark's sample job says) or librdkafka cannot read the sample.
    With `route`, of the sample's records the table takes."""
    return _inferred_from(ctx, item, _sample_ranges(targets, item, SAMPLE_RECORDS), route)


# Records of a table's share of the batch the driver reads to infer its columns again (`share_inferred`).
SHARE_RECORDS = 200_000


def share_inferred(ctx: BatchContext, targets: Targets, item: Item) -> StructType | None:
    """The columns Spark would infer from all of a plain JSON table's records of the batch (read
    by librdkafka, inferred in this process), or None: the inference is not sure, the share is
    over `SHARE_RECORDS`, or librdkafka cannot read it."""
    ranges = own_ranges(item[0], targets.ranges[item[0].table])
    route = routed_by(targets, item)
    if sum(r.records for r in ranges) > SHARE_RECORDS or isinstance(route, str):
        return None
    return _inferred_from(ctx, item, ranges, route)


def _inferred_from(
    ctx: BatchContext, item: Item, ranges: list[PartitionRange], route: RouteFilter | None = None
) -> StructType | None:  # fmt: skip
    values = _read_values(ctx, item, ranges)
    if values is None:
        return None
    if route is not None:
        taken = routed_values(values, route)
        if not taken:  # none of the table's, or one the tasks cannot route as Spark does
            return None
        values = taken
    return json_inference.inferred(values)


def _read_values(
    ctx: BatchContext, item: Item, ranges: list[PartitionRange], column: str = "value"
) -> list[bytes | None] | None:  # fmt: skip
    """The values (or keys: `column`) of `ranges`, read by librdkafka in this process; None when
    it cannot read them (Spark's source reads them then)."""
    if ctx.librdkafka is None:
        return None
    values: list[bytes | None] = []
    try:
        for batch in reader.RangeReader({**ctx.librdkafka, **reader.DRIVER_READS}).batches(
            ranges, keys=column == "key"
        ):
            values += batch.column(column).to_pylist()
    except reader.RangeReadError as e:
        log.info("table %s: its records are read through Spark's source: %s", item[0].table, e)
        return None
    return values


def routed_values(values: list[bytes | None], route: RouteFilter) -> list[bytes | None]:
    """The JSON objects of `values` that `route` takes; none when it cannot tell of one (the
    tasks would decline the table). Values that are not objects are no table's (the routing pass
    made dead letters of them, or skipped them)."""
    taken: list[bytes | None] = []
    for value in values:
        found = json_object(value)
        verdict = route.verdict(found) if found is not None else None
        if verdict is False:
            return []
        if verdict:
            taken.append(value)
    return taken
