"""Each Connect JSON record's schema reader and payload, in a one-pass task (tasks/decode_connect.py
makes the readers and the rows).

JsonConverter writes a record as `{"schema":S,"payload":P}`, S first and no spaces: a schema met
before is known by its bytes, and only P is parsed (S is most of a Debezium record's bytes). Any
other spelling is parsed whole, and its schema found by its text. Pure: no Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from icesink.tasks.decode_json import json_object

_HEAD, _SPLIT = b'{"schema":', b',"payload":'
_UNSEEN = object()


class Readers:
    """A task's readers of the Connect schemas its records carried, made by `make` (a schema's
    text -> its reader, or None when its records are not taken): by the schema's text (sorted
    keys, as parsed) and by its bytes as the records lay it out (`_raw_schema`), with the last
    schema met by its bytes, which most records repeat."""

    def __init__(self, make: Callable[[bytes], Any]) -> None:
        self._make = make
        self.by_text: dict[bytes, Any] = {}
        self.last: tuple[bytes, Any] | None = None

    def payload(self, value: bytes | None) -> tuple[Any, dict[str, Any]] | None:
        """The reader and payload of a Connect JSON record, or None when it is not one, or its
        schema's reader is None."""
        last = self.last
        if last is not None and value is not None and _lays_out(value, last[0]):
            # The last schema's bytes, compared in place: no copy of them, no hash.
            payload = _parsed_payload(value, last[0])
            if payload is not None:
                return (last[1], payload) if last[1] is not None else None
        raw = _raw_schema(value)
        if raw is not None:
            read = self.by_text.get(raw, _UNSEEN)
            if read is not _UNSEEN:
                assert value is not None
                payload = _parsed_payload(value, raw)
                if payload is not None:
                    self.last = (raw, read)
                    return (read, payload) if read is not None else None
        found = json_object(value)
        if found is None:
            return None
        schema, payload = found.get("schema"), found.get("payload")
        if type(schema) is not dict or type(payload) is not dict:
            return None
        text = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        if text not in self.by_text:
            self.by_text[text] = self._make(text)
        read = self.by_text[text]
        # The bytes before `,"payload":` are the schema's only when they are one JSON value, this
        # one (each key of `by_text` is a schema's text, mapped to that schema's reader).
        if raw is not None and _parses_to(raw, schema):
            self.by_text[raw] = read
        return (read, payload) if read is not None else None

    def payloads(self, values: Sequence[bytes]) -> tuple[Any, list[bytes]] | None:
        """The reader of the one schema every record of `values` carries, laid out as JsonConverter
        writes it, and their payloads' text; None when they are not all so, or its reader is None
        (the caller takes them a record at a time)."""
        if not values or self.payload(values[0]) is None:  # knows the first record's schema by its bytes
            return None
        raw = _raw_schema(values[0])
        read = self.by_text.get(raw) if raw is not None else None
        if raw is None or read is None:
            return None
        # `_lays_out` of each record, as one comparison of the bytes before its payload.
        start = len(_HEAD) + len(raw) + len(_SPLIT)
        head = values[0][:start]
        if not all([v.startswith(head) and v.endswith(b"}") and len(v) > start for v in values]):
            return None
        return read, [v[start:-1] for v in values]


def _lays_out(value: bytes, raw: bytes) -> bool:
    """Whether `value` is `{"schema":` `raw` `,"payload":` ... `}`: then `raw` is what
    `_raw_schema` finds in it (`raw` holds no `,"payload":`, which overlaps no other of itself)."""
    return (
        value.startswith(_HEAD)
        and value.startswith(raw, len(_HEAD))
        and value.startswith(_SPLIT, len(_HEAD) + len(raw))
        and value.endswith(b"}")
    )


def _parsed_payload(value: bytes, raw: bytes) -> dict[str, Any] | None:
    """The payload after the schema `raw` of a record `_lays_out`, when it is a JSON object."""
    try:
        payload = orjson.loads(memoryview(value)[len(_HEAD) + len(raw) + len(_SPLIT) : -1])
    except orjson.JSONDecodeError:
        return None
    return payload if type(payload) is dict else None


def _raw_schema(value: bytes | None) -> bytes | None:
    """The bytes of the record's schema if it is laid out as JsonConverter writes it (else None);
    only a schema whose bytes parse to the record's schema is known by them (`payload`)."""
    if value is None or not value.startswith(_HEAD) or not value.endswith(b"}"):
        return None
    at = value.find(_SPLIT)
    return value[len(_HEAD) : at] if at > 0 else None


def _parses_to(raw: bytes, schema: dict[str, Any]) -> bool:
    try:
        return bool(orjson.loads(raw) == schema)
    except orjson.JSONDecodeError:
        return False
