"""The Confluent wire format: byte 0 = 0x00, bytes 1-4 = big-endian schema id, then the body. Pure.

Newer Confluent serializers may instead carry the schema id in a record header
(`__value_schema_id` / `__key_schema_id`); then the value is the bare body. Here the header form
with a 4-byte integer id (prefixed by 0x00, as in the payload) is understood.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

MAGIC = 0
HEADER_SIZE = 5
VALUE_SCHEMA_ID_HEADER = "__value_schema_id"


class WireFormatError(ValueError):
    """The bytes are not in the Confluent wire format."""


@dataclass(frozen=True)
class Framed:
    schema_id: int
    body: bytes


def parse(data: bytes) -> Framed:
    if len(data) < HEADER_SIZE:
        raise WireFormatError(f"{len(data)} byte(s), shorter than the 5-byte Confluent header")
    if data[0] != MAGIC:
        raise WireFormatError(f"magic byte is 0x{data[0]:02x}, not 0x00")
    (schema_id,) = struct.unpack(">I", data[1:HEADER_SIZE])
    return Framed(schema_id, data[HEADER_SIZE:])


def frame(schema_id: int, body: bytes) -> bytes:
    return bytes([MAGIC]) + struct.pack(">I", schema_id) + body
