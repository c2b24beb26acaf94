"""The Confluent wire format's frame keys (`kafka.wire`)."""

from __future__ import annotations

import uuid

import pytest

from icesink.kafka import wire


def test_an_id_frame_key_reads_back_as_its_id() -> None:
    assert wire.id_key(256) == b"\x00\x00\x00\x01\x00"
    assert wire.schema_ref(wire.id_key(987654321)) == 987654321


def test_schema_refs_from_frame_keys() -> None:
    assert wire.schema_ref(b"\x00\x00\x00\x01\x00") == 256
    guid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert wire.schema_ref(b"\x01" + uuid.UUID(guid).bytes) == guid
    with pytest.raises(wire.WireFormatError, match="neither a schema id nor a GUID"):
        wire.schema_ref(b"\x01\x00\x00\x00\x01")
