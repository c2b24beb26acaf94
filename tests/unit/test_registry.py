"""The registry client against a real HTTP server on loopback that answers like a registry would."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from icesink.errors import RegistryAuthError, RegistryUnavailableError, SchemaNotFoundError
from icesink.kafka.registry import RegistrySettings, SchemaRegistry

SCHEMA = '{"type": "record", "name": "R", "fields": []}'


class _Registry(BaseHTTPRequestHandler):
    calls: ClassVar[list[tuple[str, str | None]]] = []
    fail_first: ClassVar[int] = 0

    def do_GET(self) -> None:
        _Registry.calls.append((self.path, self.headers.get("Authorization")))
        if _Registry.fail_first > 0:
            _Registry.fail_first -= 1
            self._reply(503, {"error_code": 50301})
        elif self.path == "/schemas/ids/7":
            self._reply(200, {"schema": SCHEMA})
        elif self.path == "/schemas/guids/0f8fad5b-d9cb-469f-a165-70867728950e":
            self._reply(200, {"schema": SCHEMA, "schemaType": "AVRO"})
        elif self.path == "/subjects/events.20240101-value/versions/latest":
            self._reply(200, {"subject": "events.20240101-value", "version": 3, "id": 42, "schema": SCHEMA})
        elif self.path == "/schemas/ids/401":
            self._reply(401, {})
        else:
            self._reply(404, {"error_code": 40403})

    def _reply(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    _Registry.calls, _Registry.fail_first = [], 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_schema_by_id_is_fetched_once_with_basic_auth(url: str) -> None:
    reg = SchemaRegistry(RegistrySettings(url=url, username="u", password="p"))
    assert reg.schema(7).schema == SCHEMA
    assert reg.schema(7).schema_type == "AVRO"
    assert _Registry.calls == [("/schemas/ids/7", "Basic " + base64.b64encode(b"u:p").decode())]


def test_schema_by_guid(url: str) -> None:
    found = SchemaRegistry(RegistrySettings(url=url)).schema("0f8fad5b-d9cb-469f-a165-70867728950e")
    assert found.schema == SCHEMA


def test_unknown_id_is_not_found_at_once(url: str) -> None:
    with pytest.raises(SchemaNotFoundError, match="schema id 99 is not known"):
        SchemaRegistry(RegistrySettings(url=url)).schema(99)
    assert len(_Registry.calls) == 1


def test_transient_errors_are_retried_then_fail_the_batch(url: str) -> None:
    _Registry.fail_first = 2
    reg = SchemaRegistry(RegistrySettings(url=url, attempts=3, max_backoff_s=0.01))
    assert reg.schema(7).schema == SCHEMA
    _Registry.fail_first = 10
    with pytest.raises(RegistryUnavailableError, match="unavailable after 3 attempts fetching schema id 8: HTTP 503"):
        reg.schema(8)


def test_refused_credentials_are_an_error_not_a_retry(url: str) -> None:
    with pytest.raises(RegistryAuthError, match=r"refused the credentials \(HTTP 401\)"):
        SchemaRegistry(RegistrySettings(url=url, username="u", password="wrong")).schema(401)
    assert len(_Registry.calls) == 1


def test_password_is_not_in_the_settings_repr() -> None:
    assert "hunter2" not in repr(RegistrySettings(url="http://r", username="u", password="hunter2"))


def test_latest_schema_id_of_a_subject_is_asked_each_time(url: str) -> None:
    reg = SchemaRegistry(RegistrySettings(url=url))
    assert reg.latest_id("events.20240101-value") == 42
    assert reg.latest_id("events.20240101-value") == 42
    assert len(_Registry.calls) == 2, "not cached: a subject's latest version changes"
    assert reg.latest_id("other-value") is None, "no such subject"


def test_latest_schema_id_while_the_registry_fails_names_the_subject(url: str) -> None:
    _Registry.fail_first = 10
    reg = SchemaRegistry(RegistrySettings(url=url, attempts=2, max_backoff_s=0.01))
    with pytest.raises(RegistryUnavailableError, match=r"latest schema of subject events\.20240101-value: HTTP 503"):
        reg.latest_id("events.20240101-value")
