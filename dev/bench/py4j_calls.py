"""`python -m dev.bench.py4j_calls [fan-out arguments]`: the fan-out benchmark (dev/bench/fanout.py)
with every py4j round trip of its driver counted, by the line of icesink's code that made it (the
innermost frame under src/icesink; a proxy's release, which py4j's finalizer thread sends, counts as
`(released proxies)`). Printed after the run: the total and the 40 busiest lines, with the kind of
each command (`call <method>`, `refl <class>` for a lookup of a class or static member).

The counts cover the whole run (both sides, every batch). A steady batch's share is the difference
between two runs that differ only in `--repeat`: e.g. `--tables 200 --records 50 --repeat 4` minus
`--repeat 2` is two steady batches of 200 tables (and two of the one-table side).
"""

from __future__ import annotations

import atexit
import collections
import os
import runpy
import sys
import threading
from pathlib import Path
from typing import Any

from py4j import java_gateway

import icesink

# icesink's own files, wherever it is installed (a folder of the clone may be named icesink too).
_PACKAGE = str(Path(icesink.__file__).parent) + os.sep
_counts: collections.Counter[tuple[str, str]] = collections.Counter()
_lock = threading.Lock()
_send = java_gateway.GatewayClient.send_command


def _where() -> str:
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_PACKAGE):
            return f"{name[len(_PACKAGE) :]}:{frame.f_code.co_name}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "(elsewhere)"


def _kind(command: str) -> str:
    lines = command.split("\n")
    if lines[0] == "c":
        return f"call {lines[2]}"
    if lines[0] == "r":
        return f"refl {lines[2].rsplit('.', 1)[-1]}"
    if lines[0] == "m":
        return "release"
    return lines[0]


def _counted(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
    kind = _kind(command)
    where = "(released proxies)" if kind == "release" else _where()
    with _lock:
        _counts[(where, kind)] += 1
    return _send(self, command, *args, **kwargs)


def _report() -> None:
    total = sum(_counts.values())
    print(f"\npy4j round trips of the driver: {total}")
    for (where, kind), n in _counts.most_common(40):
        print(f"{n:9,d}  {where}  {kind}")


def main() -> None:
    java_gateway.GatewayClient.send_command = _counted  # type: ignore[method-assign]
    atexit.register(_report)
    sys.argv = ["dev.bench.fanout", *sys.argv[1:]]
    runpy.run_module("dev.bench.fanout", run_name="__main__")


if __name__ == "__main__":
    main()
