"""Whether an Avro body is one Spark's `from_avro` cannot decode with its writer schema, beyond
doubt: Avro's Java reader (BinaryDecoder through a ResolvingDecoder) throws on it, and Spark's
path makes it a dead letter (`AvroDecodeError`).

The one-pass decoder (tasks/decode_avro.py) reads a writer schema's records as one block, so one
bad body refuses them all; the task then walks the block's bodies here, a record at a time, to
tell a dead letter from a record Spark's path would still read as a row. Java throws when a body
ends inside a value, when a union or enum index is not one of its branches or symbols, when a
length or a block's byte size is negative, or when a varint runs past 5 bytes (an int) or 10 (a
long). It does not check that a body ends where its record does (bytes after it are ignored), nor
a boolean's byte, nor a string's UTF-8: none of those is judged here. Pure and slow (Python, a
byte at a time): only for the records of a block that did not decode.
"""

from __future__ import annotations

from typing import Any

_SIZES = {"null": 0, "boolean": 1, "float": 4, "double": 8}  # Java reads a boolean's byte, any value
_VARINTS = {"int": 5, "long": 10}  # the most bytes of each


class _UndecodableError(Exception):
    """Avro's Java reader throws on this body."""


class _UnsureError(Exception):
    """Not judged here (an array of more empty items than the body has bytes)."""


def undecodable(schema: Any, body: bytes) -> bool:
    """Whether Avro's Java reader throws reading `body` (unframed) with writer schema `schema`
    (its named types written out where used, as the one-pass job keeps them)."""
    try:
        _Reader(body).value(schema)
    except _UndecodableError:
        return True
    except _UnsureError:
        return False
    return False


def _may_be_empty(t: Any) -> bool:
    """Whether a value of type `t` may take no byte (a union, a string, an array or a map takes one
    at least)."""
    if isinstance(t, list):
        return False
    kind = t["type"] if isinstance(t, dict) else t
    if isinstance(kind, dict | list):
        return _may_be_empty(kind)
    if kind == "record":
        return all(_may_be_empty(f["type"]) for f in t["fields"])
    return kind == "null" or (kind == "fixed" and int(t["size"]) == 0)


class _Reader:
    def __init__(self, body: bytes) -> None:
        self._body = body
        self._at = 0

    def _take(self, n: int) -> None:
        if n < 0 or self._at + n > len(self._body):
            raise _UndecodableError
        self._at += n

    def varint(self, max_bytes: int) -> int:
        """A zig-zag varint: an int (5 bytes at most) or a long (10), its bits beyond 32 or 64
        dropped as Java's arithmetic drops them."""
        raw, shift = 0, 0
        for _ in range(max_bytes):
            if self._at >= len(self._body):
                raise _UndecodableError
            b = self._body[self._at]
            self._at += 1
            raw |= (b & 0x7F) << shift
            if b < 0x80:
                raw &= (1 << (32 if max_bytes == 5 else 64)) - 1
                return (raw >> 1) ^ -(raw & 1)
            shift += 7
        raise _UndecodableError  # Java: "Invalid int encoding" / "Invalid long encoding"

    def value(self, t: Any) -> None:
        if isinstance(t, list):  # a union: its branch index, then the branch
            index = self.varint(5)
            if not 0 <= index < len(t):
                raise _UndecodableError
            self.value(t[index])
            return
        kind = t["type"] if isinstance(t, dict) else t
        if isinstance(kind, dict | list):  # {"type": {...}}: the type itself
            self.value(kind)
        elif kind in _SIZES:
            self._take(_SIZES[kind])
        elif kind in _VARINTS:
            self.varint(_VARINTS[kind])
        elif kind in ("string", "bytes"):
            self._take(self.varint(10))
        else:
            self._complex(t, kind)

    def _complex(self, t: dict[str, Any], kind: str) -> None:
        if kind == "fixed":
            self._take(t["size"])
        elif kind == "enum":
            if not 0 <= self.varint(5) < len(t["symbols"]):
                raise _UndecodableError
        elif kind == "record":
            for f in t["fields"]:
                self.value(f["type"])
        elif kind in ("array", "map"):
            self._blocks(t["items"] if kind == "array" else t["values"], kind == "map")
        else:
            raise ValueError(f"not an Avro type: {kind!r}")

    def _blocks(self, item: Any, keyed: bool) -> None:
        """An array's or a map's blocks: a count (negative: its byte size follows), its items, until
        a count of 0."""
        while True:
            count = self.varint(10)
            if count == 0:
                return
            if count < 0:
                self.varint(10)  # the block's byte size, which Java reads and does not check
                count = -count
            if count > len(self._body) - self._at:
                if _may_be_empty(item) and not keyed:
                    raise _UnsureError
                raise _UndecodableError  # each item takes a byte at least: the body ends first
            for _ in range(count):
                if keyed:
                    self._take(self.varint(10))
                self.value(item)
