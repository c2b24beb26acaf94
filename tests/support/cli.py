"""The job and the stack as separate processes: `icesink run`, and `dev/stack` to stop or start a service."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from dev.kit.endpoints import REPO


def run_cli(
    config_path: Path, env: Mapping[str, str] | None = None, timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    """`icesink run` in its own process (and its own Spark driver), as a user runs it."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "icesink", "run", "--config", str(config_path)],
        env=full_env, capture_output=True, text=True, timeout=timeout, cwd=REPO,
    )  # fmt: skip


def start_cli(config_path: Path, log_path: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """`icesink run` started in the background; its output goes to `log_path`."""
    out = log_path.open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "icesink", "run", "--config", str(config_path)],
        env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT, text=True, cwd=REPO,
    )  # fmt: skip


def stack(*args: str) -> None:
    """`dev/stack ...` (stop or start one service)."""
    subprocess.run([str(REPO / "dev" / "stack"), *args], check=True, timeout=300, capture_output=True)
