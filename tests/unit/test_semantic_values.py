"""Debezium's ZonedTimestamp and VariableScaleDecimal converted a whole array at a time by Arrow
(tasks/semantic_values.py `_zoned_whole`, `_variable_decimals_whole`): the values the value-at-a-time
conversion makes, and its declines, on edge cases and on seeded random arrays; the whole-array way
taken for what Debezium writes. (Against Spark's path: tests/spark/test_semantic_values.py.)"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from icesink.schema.connect import VARIABLE_DECIMAL, ZONED_TIMESTAMP
from icesink.tasks import semantic_values as sv
from icesink.tasks.decode_json import DeclinedValueError

VSD = pa.struct([("scale", pa.int32()), ("value", pa.binary())])


def outcome(convert: Any, array: pa.Array) -> Any:
    try:
        out = convert(array)
    except DeclinedValueError:
        return "declined"
    return out.cast(pa.int64()).to_pylist() if pa.types.is_timestamp(out.type) else out.to_pylist()


def vsd(unscaled: int, scale: int, pad: bytes = b"") -> dict[str, Any]:
    return {"scale": scale, "value": pad + unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)}


ZONED_EDGES = [
    "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.5+02:00", "1969-12-31T23:59:59.999999-05:30",
    "2024-02-29T00:00:00Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-23:59", "2024-01-02T03:04:05-00:00",
    "2023-02-29T00:00:00Z", "2024-04-31T00:00:00Z", "2024-01-02T24:00:00Z", "2024-01-02T23:60:00Z",
    "2024-01-02T23:59:60Z", "2024-01-02T03:04:05+24:00", "0000-01-01T00:00:00Z", "2024-01-02T03:04:05.1234567Z",
    "2024-01-02T03:04:05", "2024-01-02 03:04:05Z", "2024-01-02T03:04:05+0200", "soon",
    "\uff12\uff10\uff12\uff14-01-02T03:04:05Z",  # full-width digits: Python's \d takes them
]  # fmt: skip
DECIMAL_EDGES = [
    vsd(12_345_678, 3), vsd(-5, 2), vsd(10**19, 0), vsd(10**20 - 1, 0), vsd(10**20, 0), vsd(-(10**20), 0),
    vsd(1, 18), vsd(10, 19), vsd(11, 19), vsd(10**37, 17), vsd(5, -2), vsd(5, 39), vsd(0, 0), vsd(-1, 0),
    vsd(-647_995_741_282_682_771_847_489_129_832, 0),  # Arrow's rescale would overflow its 128 bits unchecked
    vsd(7, 2, pad=b"\x00\x00"), vsd(-7, 2, pad=b"\xff"), vsd(2**119, 30), {"scale": 2, "value": b""},
    {"scale": 2, "value": None}, None,
]  # fmt: skip


@pytest.mark.parametrize("value", ZONED_EDGES)
@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_a_zoned_timestamp_converts_whole_as_it_does_alone(value: str, kind: pa.DataType) -> None:
    for values in ([value], [value, None], ["2024-01-02T03:04:05Z", value]):
        array = pa.array(values, kind)
        assert outcome(sv.CONVERSIONS[ZONED_TIMESTAMP], array) == outcome(sv._zoned_each, array), values


@pytest.mark.parametrize("value", DECIMAL_EDGES)
def test_a_variable_scale_decimal_converts_whole_as_it_does_alone(value: Any) -> None:
    for values in ([value], [value, None], [vsd(1234, 2), value, vsd(-3, 0)]):
        array = pa.array(values, VSD)
        assert outcome(sv.CONVERSIONS[VARIABLE_DECIMAL], array) == outcome(sv._variable_decimals_each, array), values
        sliced = pa.array([vsd(9, 1), *values], VSD).slice(1)
        assert outcome(sv._variable_decimal, sliced) == outcome(sv._variable_decimals_each, sliced), values


def test_seeded_random_arrays_convert_whole_as_alone() -> None:
    rng = random.Random(36)
    for _ in range(300):
        zoned = [
            f"{rng.choice([1, 1970, 2024, 9999, rng.randrange(10_000)]):04d}-{rng.randrange(1, 14):02d}-"
            f"{rng.randrange(1, 32):02d}T{rng.randrange(25):02d}:{rng.randrange(61):02d}:{rng.randrange(61):02d}"
            f"{rng.choice(['', '.5', f'.{rng.randrange(10**6):06d}'])}"
            f"{rng.choice(['Z', f'+{rng.randrange(25):02d}:{rng.randrange(60):02d}', '-05:30'])}"
            for _ in range(rng.choice([1, 5, 40]))
        ]
        array = pa.array(zoned)
        assert outcome(sv._zoned, array) == outcome(sv._zoned_each, array), zoned
        decimals = [
            vsd(rng.randrange(-(2**bits), 2**bits), rng.choice([0, 2, 6, 18, 19, 30]))
            for bits in [rng.choice([7, 40, 64, 90, 119]) for _ in range(rng.choice([1, 5, 40]))]
        ]
        array = pa.array(decimals, VSD)
        assert outcome(sv._variable_decimal, array) == outcome(sv._variable_decimals_each, array), decimals


def test_what_debezium_writes_converts_whole() -> None:
    zoned = pa.array(["2024-01-02T03:04:05.123456Z", None, "1999-12-31T23:59:59+05:30"])
    assert sv._zoned_whole(zoned) is not None
    decimals = pa.array([vsd(1234, 2), None, vsd(-5, 0), vsd(10**30, 18)], VSD)
    assert sv._variable_decimals_whole(decimals) is not None
