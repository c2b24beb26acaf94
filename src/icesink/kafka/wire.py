"""The Confluent wire format: byte 0 = 0x00, bytes 1-4 = big-endian schema id, then the body. Pure.

Newer Confluent serializers may instead carry the schema in a record header (`__value_schema_id`
/ `__key_schema_id`) and leave the value a bare body: 0x01 + the schema's 16-byte GUID, or 0x00 +
a 4-byte id. Both are understood.
"""

from __future__ import annotations

import struct
import uuid

MAGIC = 0
GUID_MAGIC = 1
HEADER_SIZE = 5
GUID_HEADER_SIZE = 17


class WireFormatError(ValueError):
    """The bytes are not in the Confluent wire format."""


def json_text(value: bytes) -> bytes:
    """The JSON text of a value, without the 5-byte frame Confluent's JSONSerializer puts before
    it (a JSON text never starts with a zero byte), as Spark's path strips it (json_rows.json_text)."""
    return value[HEADER_SIZE:] if len(value) >= HEADER_SIZE and value[0] == MAGIC else value


def id_key(schema_id: int) -> bytes:
    """The frame key of an integer schema id (0x00 + 4 bytes), as `schema_ref` reads it back."""
    return bytes([MAGIC]) + struct.pack(">I", schema_id)


def schema_ref(key: bytes) -> int | str:
    """The schema a frame key names: an integer id (0x00 + 4 bytes) or a GUID (0x01 + 16 bytes)."""
    if len(key) == HEADER_SIZE and key[0] == MAGIC:
        return int(struct.unpack(">I", key[1:])[0])
    if len(key) == GUID_HEADER_SIZE and key[0] == GUID_MAGIC:
        return str(uuid.UUID(bytes=key[1:]))
    raise WireFormatError(f"{len(key)} byte(s) starting 0x{key[:1].hex() or '-'}: neither a schema id nor a GUID")
