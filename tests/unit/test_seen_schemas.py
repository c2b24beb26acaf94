from icesink.batch.seen_schemas import SeenSchemas, refs_by_topic


def test_a_topic_not_seen_yet_means_the_decoder_looks_first() -> None:
    seen = SeenSchemas()
    assert seen.expected("value", ["a"]) is None
    seen.learn("value", {"a": {b"1"}})
    assert seen.expected("value", ["a"]) == [b"1"]
    assert seen.expected("value", ["a", "b"]) is None, "one unseen topic is enough"
    assert seen.expected("key", ["a"]) is None, "values and keys are apart"


def test_what_a_pass_saw_replaces_what_was_known_of_its_topics_only() -> None:
    seen = SeenSchemas()
    seen.learn("value", {"a": {b"1", b"2"}, "b": {b"3"}})
    seen.learn("value", {"a": {b"2", None}})
    assert seen.expected("value", ["a"]) == [b"2"], "a schema that stopped appearing is dropped; None is no schema"
    assert seen.expected("value", ["a", "b"]) == [b"2", b"3"]


def test_a_topic_whose_records_carry_no_schema_is_seen_with_none() -> None:
    seen = SeenSchemas()
    seen.learn("key", {"a": {None}})
    assert seen.expected("key", ["a"]) == []


def test_refs_by_topic_splits_the_observed_rows() -> None:
    rows = [("a", bytearray(b"v1"), None), ("a", bytearray(b"v2"), bytearray(b"k1")), ("b", None, bytearray(b"k2"))]
    values, keys = refs_by_topic(rows)
    assert values == {"a": {b"v1", b"v2"}, "b": {None}}
    assert keys == {"a": {None, b"k1"}, "b": {b"k2"}}
