"""A random keyed change stream and its oracle: the last-writer-wins state of every key.

Every key stays on one partition (as Kafka's key hashing does), so generation order is also the
Kafka offset order of each key's changes. Deletes of keys never inserted and inserts of live keys
happen too: both must be harmless.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Change:
    key: int
    op: str  # I, U, D, or T (a tombstone: a null value)
    seq: int
    partition: int

    def kafka_key(self) -> bytes:
        return json.dumps({"id": self.key}).encode()

    def kafka_value(self) -> bytes | None:
        if self.op == "T":
            return None
        return json.dumps({"id": self.key, "v": self.seq, "name": f"k{self.key}-{self.seq}", "op": self.op}).encode()


def random_changes(count: int, keys: int, partitions: int, seed: int, tombstones: bool = True) -> Iterator[Change]:
    rng = random.Random(seed)
    delete = ("D", "T") if tombstones else ("D", "D")
    live: set[int] = set()
    for seq in range(count):
        # Skewed: a tenth of the keys get half of the changes.
        key = rng.randrange(keys // 10) if rng.random() < 0.5 else rng.randrange(keys)
        if key in live:
            op = rng.choices(["U", delete[0], delete[1], "I"], weights=[70, 17, 8, 5])[0]
        else:
            op = rng.choices(["I", "U", delete[0], delete[1]], weights=[85, 5, 7, 3])[0]
        if op in ("D", "T"):
            live.discard(key)
        else:
            live.add(key)
        yield Change(key, op, seq, key % partitions)


def oracle(changes: list[Change]) -> dict[int, int]:
    """key -> the `v` of its last insert or update, for keys whose last change is not a delete."""
    state: dict[int, int] = {}
    for c in changes:
        if c.op in ("D", "T"):
            state.pop(c.key, None)
        else:
            state[c.key] = c.seq
    return state
