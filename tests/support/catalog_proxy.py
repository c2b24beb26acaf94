"""A loopback HTTP proxy in front of the REST catalog that loses the answers to table commits.

The commit reaches the catalog and is applied; the client then sees no answer (`drop`: the
connection is closed) or a 503/502 (`503`, `502`), as with a load balancer timing out; with
`outage`, every request after the lost answer also gets a 503 for `outage_s` seconds, so the
client cannot even look whether its commit landed. The job cannot tell whether its snapshot
landed: exactly the case it must settle from the table itself. `faults` are the ways the next
commits' answers are lost, one commit each, in order; `transaction_faults` the same for the
multi-table commits (`POST /v1/transactions/commit`), where `unsent` answers a 503 without
forwarding the request (nothing applied, and the client cannot know) and `400` a Bad Request
without forwarding it (a catalog that does not take such a request).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse


class CatalogProxy:
    def __init__(
        self, upstream: str, faults: Sequence[str], outage_s: float = 15, transaction_faults: Sequence[str] = ()
    ) -> None:  # fmt: skip
        self.upstream = urlparse(upstream)
        self.remaining_transactions = list(transaction_faults)
        self.transactions = 0  # multi-table commits received
        self.outage_s = outage_s
        self.down_until = 0.0
        self.refused = 0  # requests answered 503 during an outage
        self.remaining = list(faults)
        self.faults: list[str] = []  # how each answer lost so far was lost
        self.commits = 0  # table commits forwarded
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> CatalogProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _lose_this_answer(self, method: str, path: str, body: bytes) -> str | None:
        # A table commit: POST /v1/namespaces/{ns}/tables/{table} with a new snapshot.
        parts = path.split("?")[0].strip("/").split("/")
        if method == "POST" and parts[-2:] == ["transactions", "commit"]:
            with self._lock:
                self.transactions += 1
                if not self.remaining_transactions:
                    return None
                fault = self.remaining_transactions.pop(0)
                self.faults.append(f"transaction {fault}")
                return fault
        if method != "POST" or len(parts) != 5 or parts[3] != "tables" or b"add-snapshot" not in body:
            return None
        try:
            name = parts[4]
            updates = json.loads(body).get("updates", [])
        except ValueError:
            return None
        with self._lock:
            self.commits += 1
            if not self.remaining or name == "dead_letters" or not updates:
                return None
            fault = self.remaining.pop(0)
            self.faults.append(fault)
            if fault == "outage":
                self.down_until = time.monotonic() + self.outage_s
            return fault

    def _down(self) -> bool:
        with self._lock:
            down = time.monotonic() < self.down_until
            self.refused += down
            return down

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _answer(self, status: int, body: bytes = b"") -> None:
                """An answer of the proxy's own, the request not forwarded."""
                self.send_response(status)
                if body:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if proxy._down():
                    self._answer(503)
                    return
                lose = proxy._lose_this_answer(self.command, self.path, body)
                if lose == "unsent":
                    self._answer(503)
                    return
                if lose == "400":  # a catalog that does not take the request
                    self._answer(400, b'{"error": {"message": "not supported here", "type": "BadRequestException", '
                                      b'"code": 400}}')  # fmt: skip
                    return
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=120)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
                payload = answer.read()
                conn.close()
                if lose == "drop":
                    self.close_connection = True  # applied upstream, no answer here
                    return
                status = (503 if lose == "outage" else int(lose)) if lose else answer.status
                self.send_response(status)
                sent = {"content-length", "connection", "transfer-encoding"}
                for k, v in answer.getheaders():
                    if k.lower() not in sent and not lose:
                        self.send_header(k, v)
                out = (
                    b'{"error": {"message": "upstream timed out", "type": "ServiceUnavailable", "code": %d}}' % (status)
                    if lose
                    else payload
                )
                if lose:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(out)
                self.close_connection = True

            do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _forward  # noqa: N815

        return Handler
