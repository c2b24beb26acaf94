"""The decoders' memo of built expressions: built once per key, least recently used dropped first."""

from __future__ import annotations

from icesink.batch.decode import ExpressionMemo


def test_builds_once_per_key_and_drops_the_least_recently_used() -> None:
    built: list[str] = []

    def build(key: str) -> str:
        built.append(key)
        return key.upper()

    memo: ExpressionMemo[str] = ExpressionMemo(capacity=2)
    assert memo.get("a", lambda: build("a")) == "A"
    assert memo.get("b", lambda: build("b")) == "B"
    assert memo.get("a", lambda: build("a")) == "A"  # a hit, and now the most recent
    assert memo.get("c", lambda: build("c")) == "C"  # evicts b, not a
    assert memo.get("a", lambda: build("a")) == "A"
    assert memo.get("b", lambda: build("b")) == "B"
    assert built == ["a", "b", "c", "b"]
