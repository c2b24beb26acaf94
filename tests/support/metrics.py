"""The job's metrics as a scraper sees them: the driver's Prometheus endpoint on a free port."""

from __future__ import annotations

import re
import socket
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> dict[str, float]:
    """The driver's Prometheus endpoint, icesink's source only: metric name -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics/prometheus", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"metrics_\w+?_driver_icesink_(\w+?)(?:\{[^}]*\})? (\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def scraped_into(port: int, seen: dict[str, float]) -> bool:
    """Whether the endpoint answered (False while the driver's UI is not up yet); what it served
    goes into `seen`."""
    try:
        seen.update(scrape(port))
    except OSError:
        return False
    return True
