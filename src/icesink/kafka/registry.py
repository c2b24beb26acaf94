"""A Confluent-compatible Schema Registry client: writer schemas by id, cached per process.

Transient faults (connection refused, timeouts, 5xx) are retried with backoff and then raised as
`RegistryUnavailableError`, which fails the batch with no commit; a transient fault is never a dead
letter. An id the registry does not know (404) is `SchemaNotFoundError`: the records carrying it are
dead letters.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import requests
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from icesink.errors import RegistryAuthError, RegistryUnavailableError, SchemaNotFoundError


class _TransientError(Exception):
    pass


@dataclass(frozen=True)
class RegistrySettings:
    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    verify: bool | str = True  # False, True or a CA bundle path
    cert: tuple[str, str] | None = None  # client certificate and key for mutual TLS
    timeout_s: float = 10.0
    attempts: int = 5
    max_backoff_s: float = 8.0


SchemaRef = int | str  # an integer id, or a GUID


@dataclass(frozen=True)
class RegisteredSchema:
    schema_id: SchemaRef
    schema_type: str  # AVRO, JSON or PROTOBUF
    schema: str


class SchemaRegistry:
    def __init__(self, settings: RegistrySettings) -> None:
        self._s = settings
        self._session = requests.Session()
        if settings.username is not None:
            self._session.auth = (settings.username, settings.password or "")
        self._session.verify = settings.verify
        if settings.cert:
            self._session.cert = settings.cert
        self._cache: dict[SchemaRef, RegisteredSchema] = {}
        self._lock = threading.Lock()

    def schema(self, schema_id: SchemaRef) -> RegisteredSchema:
        """By integer id (`/schemas/ids/{id}`) or by GUID (`/schemas/guids/{guid}`)."""
        with self._lock:
            hit = self._cache.get(schema_id)
        if hit is not None:
            return hit
        found = self._fetch(schema_id)
        with self._lock:
            self._cache[schema_id] = found
        return found

    def _fetch(self, schema_id: SchemaRef) -> RegisteredSchema:
        kind = "guids" if isinstance(schema_id, str) else "ids"
        body = self._get_retried(f"/schemas/{kind}/{schema_id}", f"schema id {schema_id}")
        if body is None:
            raise SchemaNotFoundError(f"schema id {schema_id} is not known to the registry {self._s.url}")
        return RegisteredSchema(schema_id, str(body.get("schemaType", "AVRO")), str(body["schema"]))

    def latest_id(self, subject: str) -> int | None:
        """The id of the subject's latest schema version; None when the registry has no such
        subject (`/subjects/{subject}/versions/latest`). Not cached: it changes."""
        path = f"/subjects/{quote(subject, safe='')}/versions/latest"
        body = self._get_retried(path, f"the latest schema of subject {subject}")
        return int(body["id"]) if body is not None and "id" in body else None

    def _get_retried(self, path: str, what: str) -> dict[str, Any] | None:
        """`_get` of the registry's `path`, retried while the registry is unavailable; then
        RegistryUnavailableError, naming `what` was being fetched."""
        s = self._s
        fetch = retry(
            retry=retry_if_exception_type(_TransientError),
            stop=stop_after_attempt(s.attempts),
            wait=wait_exponential(multiplier=0.25, max=s.max_backoff_s),
            reraise=True,
        )(self._get)
        try:
            return fetch(f"{s.url.rstrip('/')}{path}")
        except _TransientError as e:
            raise RegistryUnavailableError(
                f"schema registry {s.url} unavailable after {s.attempts} attempts fetching {what}: {e}"
            ) from None

    def _get(self, url: str) -> dict[str, Any] | None:
        try:
            resp = self._session.get(url, timeout=self._s.timeout_s)
        except (requests.ConnectionError, requests.Timeout) as e:
            raise _TransientError(type(e).__name__) from e
        if resp.status_code == 404:
            return None
        if resp.status_code >= 500 or resp.status_code == 429:
            raise _TransientError(f"HTTP {resp.status_code}")
        if resp.status_code in (401, 403):
            raise RegistryAuthError(f"schema registry {self._s.url} refused the credentials (HTTP {resp.status_code})")
        resp.raise_for_status()
        data: dict[str, Any] = resp.json()
        return data


_registries: dict[RegistrySettings, SchemaRegistry] = {}
_registries_lock = threading.Lock()


def registry_for(settings: RegistrySettings) -> SchemaRegistry:
    """One client per settings per process, so each executor's Python worker caches once."""
    with _registries_lock:
        reg = _registries.get(settings)
        if reg is None:
            reg = _registries[settings] = SchemaRegistry(settings)
        return reg
