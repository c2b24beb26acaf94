"""Reader schemas from writer schemas (`schema.avro`)."""

from __future__ import annotations

import json

import pytest

from icesink.schema import avro as avro_schema


def test_reader_schema_gets_a_defaulted_sentinel_once() -> None:
    writer = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
    reader = json.loads(avro_schema.reader_with_sentinel(avro_schema.reader_with_sentinel(writer)))
    assert [f["name"] for f in reader["fields"]] == ["a", avro_schema.SENTINEL]
    assert reader["fields"][-1] == {"name": avro_schema.SENTINEL, "type": "boolean", "default": True}


@pytest.mark.parametrize(("text", "why"), [('"string"', "not a record"), ("{nope", "not a JSON Avro schema")])
def test_schemas_that_cannot_be_rows(text: str, why: str) -> None:
    with pytest.raises(avro_schema.AvroSchemaError, match=why):
        avro_schema.reader_with_sentinel(text)
