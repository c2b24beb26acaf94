"""The Avro decoder's one-pass guess (AvroDecoder.guess): what the topics carried last time, else
the latest schema of each topic's subject; nothing when a topic has no subject."""

from __future__ import annotations

from typing import Any

from icesink.batch.decode import KEY
from icesink.batch.decode.avro import AvroDecoder


class Latest:
    def __init__(self, ids: dict[str, int]) -> None:
        self.ids = ids
        self.asked: list[str] = []

    def latest_id(self, subject: str) -> int | None:
        self.asked.append(subject)
        return self.ids.get(subject)


def decoder(registry: Any, **kwargs: Any) -> AvroDecoder:
    return AvroDecoder(registry, **kwargs)


def test_what_the_topics_carried_last_time_comes_first() -> None:
    registry = Latest({})
    assert decoder(registry).guess([b"\x00\x00\x00\x00\x07"], None, ["t"]) == [b"\x00\x00\x00\x00\x07"]
    assert registry.asked == []


def test_unseen_topics_take_their_subjects_latest_schema() -> None:
    registry = Latest({"a.20240101-value": 7, "a.20240102-value": 300, "a.20240101-key": 9})
    values = decoder(registry).guess(None, None, ["a.20240101", "a.20240102"])
    assert values == [b"\x00\x00\x00\x00\x07", b"\x00\x00\x00\x01\x2c"]
    assert decoder(registry, src=KEY).guess(None, None, ["a.20240101"]) == [b"\x00\x00\x00\x00\x09"]


def test_a_topic_without_a_subject_means_looking_at_the_records() -> None:
    registry = Latest({"a-value": 7})
    assert decoder(registry).guess(None, None, ["a", "b"]) is None
