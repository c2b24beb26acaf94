"""The benchmark's input: one ~200-byte event (18 fields with logical types) as Confluent-wire-format
Avro, as JSON, as a keyed CDC stream, and as that stream's Debezium change events (Avro keys and
envelopes, tombstones), produced to fresh topics (2 partitions)."""

from __future__ import annotations

import datetime as dt
import json
import random
import time
from collections.abc import Callable
from decimal import Decimal
from io import BytesIO
from typing import Any

from dev.kit import debezium_avro as dbz
from dev.kit import debezium_json as dj
from dev.kit.endpoints import KAFKA
from dev.kit.kafka import SERDE_CONF, registry_client

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Event",
    "namespace": "bench.icesink",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user_id", "type": "long"},
        {"name": "session", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "event_type", "type": "string"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "currency", "type": "string"},
        {"name": "country", "type": "string"},
        {"name": "device", "type": "string"},
        {"name": "os", "type": "string"},
        {"name": "app_version", "type": "string"},
        {"name": "price", "type": "double"},
        {"name": "quantity", "type": "int"},
        {"name": "promoted", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "page_url", "type": "string"},
        {"name": "user_agent", "type": "string"},
    ],
}
CDC_SCHEMA: dict[str, Any] = {
    **SCHEMA,
    "name": "Change",
    "fields": [*SCHEMA["fields"], {"name": "op", "type": "string"}],
}
# SCHEMA with nested values as producers write them: tags, attributes and line items.
NESTED_SCHEMA: dict[str, Any] = {
    **SCHEMA,
    "name": "Order",
    "fields": [
        *SCHEMA["fields"],
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "string"}},
        {
            "name": "items",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Item",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "qty", "type": "int"},
                        {"name": "price", "type": "double"},
                    ],
                },
            },
        },
    ],
}
# SCHEMA's fields, some in nested records (a flattened table's columns: client_country, page_url, ...).
_CLIENT = ("country", "device", "os", "app_version")
_PAGE = ("page_url", "user_agent")
GROUPED_SCHEMA: dict[str, Any] = {
    **SCHEMA,
    "name": "Grouped",
    "fields": [
        *(f for f in SCHEMA["fields"] if f["name"] not in _CLIENT + _PAGE),
        {
            "name": "client",
            "type": {
                "type": "record",
                "name": "Client",
                "fields": [f for f in SCHEMA["fields"] if f["name"] in _CLIENT],
            },
        },
        {
            "name": "page",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Page",
                    "fields": [
                        {"name": "url", "type": "string"},
                        {"name": "user_agent", "type": "string"},
                    ],
                },
            ],
            "default": None,
        },
    ],
}
# Debezium's Avro converter, its defaults (dev/kit/debezium_avro.py): the row as the envelope's
# before/after; the key an Avro record of the primary key.
DEBEZIUM_ENVELOPE = dbz.envelope({**SCHEMA, "name": "Value", "namespace": "bench.public.events"})
DEBEZIUM_KEY = dbz.key_schema("bench.public.events", [{"name": "id", "type": "long"}])
BASE = dt.datetime(2024, 1, 2, tzinfo=dt.UTC)

# The JSON records' fields (`as_json`), with the types Spark infers from them, which icesink's
# tables get too: Spark's own sink then writes the same columns from the same rows.
JSON_DDL = (
    "id bigint, user_id bigint, session string, event_type string, ts bigint, day string, amount double, "
    "currency string, country string, device string, os string, app_version string, price double, "
    "quantity bigint, promoted boolean, note string, page_url string, user_agent string"
)


def event(i: int, key: int | None = None, days: int = 7) -> dict[str, Any]:
    k = i if key is None else key
    return {
        "id": k, "user_id": i % 50_000, "session": f"{i:08x}-0000-4000-8000-{k:012x}",
        "event_type": ("view", "cart", "purchase")[i % 3], "ts": BASE + dt.timedelta(milliseconds=i),
        "day": dt.date(2024, 1, 2) + dt.timedelta(days=i % days), "amount": Decimal(i % 100_000) / 100,
        "currency": "EUR", "country": ("DE", "FR", "JP", "US")[i % 4], "device": "mobile",
        "os": ("ios", "android")[i % 2], "app_version": "3.14.1", "price": i * 0.25, "quantity": i % 7,
        "promoted": i % 5 == 0, "note": None if i % 4 else f"note {i}",
        "page_url": f"https://shop.example.com/catalog/item/{i % 9973}?ref=home",
        "user_agent": f"Mozilla/5.0 (Linux; Android 14) App/3.14.{i % 10}",
    }  # fmt: skip


def nested_event(i: int) -> dict[str, Any]:
    """`event(i)` with 0-3 tags, 1-2 attributes and 1-3 line items."""
    return {
        **event(i),
        "tags": ["new", "gift", "sale"][: i % 4],
        "attrs": {"channel": ("web", "app")[i % 2], **({"coupon": f"C{i % 97}"} if i % 3 == 0 else {})},
        "items": [{"sku": f"sku-{(i + j) % 500}", "qty": 1 + j, "price": 9.5 * (j + 1)} for j in range(1 + i % 3)],
    }


def grouped_event(i: int) -> dict[str, Any]:
    """`event(i)` as GROUPED_SCHEMA nests it (no page for every tenth)."""
    e = event(i)
    out = {k: v for k, v in e.items() if k not in _CLIENT + _PAGE}
    out["client"] = {k: e[k] for k in _CLIENT}
    out["page"] = None if i % 10 == 0 else {"url": e["page_url"], "user_agent": e["user_agent"]}
    return out


def as_json(e: dict[str, Any]) -> bytes:
    out = dict(e)
    out["ts"] = int(e["ts"].timestamp() * 1000)
    out["day"] = e["day"].isoformat()
    out["amount"] = float(e["amount"])
    return json.dumps(out, separators=(",", ":")).encode()


class AvroWriter:
    """Confluent wire format: registers the schema under {topic}-value through confluent-kafka's
    AvroSerializer once, then frames fastavro bodies with its id (the same bytes, faster)."""

    def __init__(
        self, topic: str, schema: dict[str, Any], sample: dict[str, Any] | None = None, key: bool = False
    ) -> None:
        import fastavro
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        ser = AvroSerializer(registry_client(), json.dumps(schema), conf=SERDE_CONF)
        if sample is None:
            sample = event(0) if schema is SCHEMA else {**event(0), "op": "I"}
        first = ser(sample, SerializationContext(topic, MessageField.KEY if key else MessageField.VALUE))
        assert first is not None
        self.header = first[:5]
        self.schema_id = int.from_bytes(first[1:5], "big")
        self._parsed = fastavro.parse_schema(schema)
        self._write = fastavro.schemaless_writer
        assert self(sample) == first

    def __call__(self, record: dict[str, Any]) -> bytes:
        buf = BytesIO()
        buf.write(self.header)
        self._write(buf, self._parsed, record)
        return buf.getvalue()


def producer(linger_ms: int = 50) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": KAFKA,
            "enable.idempotence": True,
            "linger.ms": linger_ms,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
        }
    )


def send(
    p: Any, topic: str, value: bytes | None, key: bytes | None, partition: int,
    headers: list[tuple[str, bytes]] | None = None,
) -> None:  # fmt: skip
    while True:
        try:
            p.produce(topic, value=value, key=key, partition=partition, headers=headers)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            p.poll(0.2)


def cdc_changes(n: int, seed: int) -> list[tuple[int, str]]:
    """(key, op): 70% inserts of new keys, 25% updates and 5% deletes of skewed existing keys (a
    tenth of the keys get about half of the updates and deletes)."""
    rng = random.Random(seed)
    out: list[tuple[int, str]] = []
    next_key = 0
    for _ in range(n):
        r = rng.random()
        if r < 0.70 or next_key == 0:
            out.append((next_key, "I"))
            next_key += 1
            continue
        hot = rng.random() < 0.5
        key = rng.randrange(max(1, next_key // 10)) if hot else rng.randrange(next_key)
        out.append((key, "U" if r < 0.95 else "D"))
    return out


def debezium_event(i: int, key: int, op: str) -> dict[str, Any]:
    """A Debezium change event of the benchmark's row: a delete carries the row as before."""
    return dbz.event(op, event(i, key), 1_000 + i, "events")


def load_debezium(p: Any, topic: str, n: int) -> int:
    """The CDC stream as Debezium writes it with its defaults (Avro keys and envelopes, a tombstone
    after each delete); returns the values' bytes."""
    values = AvroWriter(topic, DEBEZIUM_ENVELOPE, debezium_event(0, 0, "I"))
    keys = AvroWriter(topic, DEBEZIUM_KEY, {"id": 0}, key=True)
    size = 0
    for i, (key, op) in enumerate(cdc_changes(n, seed=7)):
        v, k = values(debezium_event(i, key, op)), keys({"id": key})
        size += len(v)
        send(p, topic, v, k, key % 2)
        if op == "D":
            send(p, topic, None, k, key % 2)
    return size


# The same row as Debezium's JsonConverter writes it with its defaults (dev/kit/debezium_json.py):
# the schema in every record, a precise Decimal, adaptive temporal types; the key Connect JSON too.
_STRINGS = ("event_type", "currency", "country", "device", "os", "app_version", "page_url", "user_agent")
DEBEZIUM_JSON_ENVELOPE = dj.envelope_schema(
    "bench.public.events",
    [
        dj.field("id", "int64", optional=False), dj.field("user_id", "int64", optional=False),
        dj.field("session", "string", optional=False, name="io.debezium.data.Uuid", version=1),
        dj.field("ts", "int64", optional=False, name="io.debezium.time.MicroTimestamp", version=1),
        dj.field("day", "int32", optional=False, name="io.debezium.time.Date", version=1),
        dj.decimal_field("amount", 12, 2), dj.field("price", "double", optional=False),
        dj.field("quantity", "int32", optional=False), dj.field("promoted", "boolean", optional=False),
        dj.field("note", "string"), *[dj.field(name, "string", optional=False) for name in _STRINGS],
    ],
)  # fmt: skip
DEBEZIUM_JSON_KEY = dj.key_schema("bench.public.events", [dj.field("id", "int64", optional=False)])
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def debezium_json_row(i: int, key: int) -> dict[str, Any]:
    e = event(i, key)
    return {
        **e, "ts": (e["ts"] - _EPOCH) // dt.timedelta(microseconds=1), "day": (e["day"] - _EPOCH.date()).days,
        "amount": dj.decimal_value(str(e["amount"]), 2),
    }  # fmt: skip


def load_debezium_json(p: Any, topic: str, n: int) -> int:
    """The CDC stream as Debezium writes it with JsonConverter's defaults (Connect JSON keys and
    envelopes with their schemas, a tombstone after each delete); returns the values' bytes."""
    size = 0
    ops = {"I": "c", "U": "u", "D": "d"}
    for i, (key, op) in enumerate(cdc_changes(n, seed=7)):
        row = debezium_json_row(i, key)
        before, after = (row, None) if op == "D" else (None, row)
        v = dj.change(DEBEZIUM_JSON_ENVELOPE, ops[op], before, after, 1_000 + i)
        k = dj.wrapped(DEBEZIUM_JSON_KEY, {"id": key})
        size += len(v)
        send(p, topic, v, k, key % 2)
        if op == "D":
            send(p, topic, None, k, key % 2)
    return size


def _encoder(topic: str, variant: str) -> Callable[[int], bytes]:
    """Record i's value, for the variants of one append record per i."""
    if variant == "avro-nested":
        nested = AvroWriter(topic, NESTED_SCHEMA, sample=nested_event(0))
        return lambda i: nested(nested_event(i))
    if variant == "avro-grouped":
        grouped = AvroWriter(topic, GROUPED_SCHEMA, sample=grouped_event(0))
        return lambda i: grouped(grouped_event(i))
    if variant == "json-grouped":
        return lambda i: as_json(grouped_event(i))
    if variant == "avro":
        flat = AvroWriter(topic, SCHEMA)
        return lambda i: flat(event(i))
    return lambda i: as_json(event(i))


def load(topic: str, variant: str, n: int, first: int = 0) -> float:
    """Produces records first..first+n of a variant; returns the mean value size."""
    p = producer()
    size = 0
    if variant == "debezium":
        size = load_debezium(p, topic, n)
    elif variant == "debezium-json":
        size = load_debezium_json(p, topic, n)
    elif variant == "cdc":
        writer = AvroWriter(topic, CDC_SCHEMA)
        for i, (key, op) in enumerate(cdc_changes(n, seed=7)):
            v = writer({**event(i, key), "op": op})
            size += len(v)
            send(p, topic, v, str(key).encode(), key % 2)
    elif variant == "avro-headers":
        # Newer Confluent serializers: a bare body, the schema id in a header (kafka/wire.py).
        flat = AvroWriter(topic, SCHEMA)
        for i in range(first, first + n):
            v = flat(event(i))
            size += len(v) - 5
            send(p, topic, v[5:], None, i % 2, [("__value_schema_id", v[:5])])
    else:
        encode = _encoder(topic, variant)
        for i in range(first, first + n):
            v = encode(i)
            size += len(v)
            send(p, topic, v, None, i % 2)
    assert p.flush(120) == 0, f"records to {topic} not delivered"
    return size / max(n, 1)


# The steady Debezium input's keys, apart from the warm-up's (cdc_changes counts from 0 for both).
STEADY_FIRST_KEY = 10**6


def _event_sender(p: Any, topic: str) -> Callable[[int], None]:
    writer = AvroWriter(topic, SCHEMA)
    return lambda i: send(p, topic, writer(event(i)), None, i % 2)


def _debezium_sender(p: Any, topic: str, n: int) -> Callable[[int], None]:
    values = AvroWriter(topic, DEBEZIUM_ENVELOPE, debezium_event(0, 0, "I"))
    keys = AvroWriter(topic, DEBEZIUM_KEY, {"id": 0}, key=True)
    changes = cdc_changes(n, seed=11)

    def send_one(i: int) -> None:
        key, op = changes[i]
        key += STEADY_FIRST_KEY
        k = keys({"id": key})
        send(p, topic, values(debezium_event(i, key, op)), k, key % 2)
        if op == "D":
            send(p, topic, None, k, key % 2)

    return send_one


def produce_steady(topic: str, rate: int, seconds: int, variant: str = "avro") -> None:
    """`rate` records/s for `seconds`, in 10 ms slices. Slices as long as 100 ms made a freshness
    run's median depend on where they fell against the trigger's ticks (the same for the whole
    run, different from one run to the next): up to 0.1 s of noise between runs of either sink.
    The producer lingers 5 ms, not the bulk loads' 50, for the same reason. `debezium`: `rate`
    change events/s (`load_debezium`'s, with a tombstone after each delete), keys apart from the
    warm-up's."""
    p = producer(linger_ms=5)
    send_one = _debezium_sender(p, topic, seconds * rate) if variant == "debezium" else _event_sender(p, topic)
    slices = 100  # a second's
    started = time.monotonic()
    i = 0
    for s in range(int(seconds * slices)):
        # Whole records per slice that add up to `rate` a second.
        for _ in range((s + 1) * rate // slices - s * rate // slices):
            send_one(i)
            i += 1
        p.poll(0)
        wait = started + (s + 1) / slices - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    assert p.flush(60) == 0
