"""Produces sample JSON events to daily-rotated topics for the demo (scripts/demo)."""

from __future__ import annotations

import argparse
import json
import random
import uuid
from datetime import UTC, datetime, timedelta

from confluent_kafka import Producer


def events(day: str, n: int, rng: random.Random) -> list[dict[str, object]]:
    start = datetime.strptime(day, "%Y%m%d").replace(tzinfo=UTC)
    out = []
    for _ in range(n):
        kind = rng.choices(["view", "cart", "purchase"], weights=[70, 20, 10])[0]
        out.append(
            {
                "event_id": str(uuid.UUID(int=rng.getrandbits(128))),
                "user_id": rng.randint(1, 5000),
                "type": kind,
                "amount": round(rng.uniform(5, 500), 2) if kind == "purchase" else None,
                "ts": (start + timedelta(seconds=rng.randint(0, 86399))).isoformat(),
                "device": {"os": rng.choice(["ios", "android", "web"]), "app": f"3.{rng.randint(0, 9)}"},
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--per-topic", type=int, default=5000)
    parser.add_argument("topics", nargs="+", help="e.g. events.20240102 events_20240103")
    args = parser.parse_args()
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 20})
    rng = random.Random()
    for topic in args.topics:
        day = topic[-8:]
        for e in events(day, args.per_topic, rng):
            producer.produce(topic, key=str(e["user_id"]).encode(), value=json.dumps(e).encode())
            producer.poll(0)
        print(f"[demo] produced {args.per_topic} JSON events to {topic}")
    if producer.flush(30):
        raise SystemExit("[demo] some events were not delivered")


if __name__ == "__main__":
    main()
