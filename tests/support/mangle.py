"""Good records with random bytes changed, dropped or added: the fuzz of the tests that hold a
batch-at-a-time parse to the record-at-a-time one (tests/unit/test_json_parsed.py and others)."""

from __future__ import annotations

import random


def mangled(record: bytes, rng: random.Random, alphabet: bytes) -> bytes:
    """`record` with one to three bytes changed, dropped or added (from `alphabet`), as `rng` says."""
    found = bytearray(record)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(found) + 1)
        kind = rng.randrange(3)
        if kind == 0 and at < len(found):
            found[at] = rng.choice(alphabet)
        elif kind == 1 and at < len(found):
            del found[at]
        else:
            found[at:at] = bytes([rng.choice(alphabet)])
    return bytes(found)
