"""The job and the stack as separate processes: `icesink run` (and waiting on it: its log, its pause
points, its end), and `dev/stack` to stop or start a service."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from dev.kit.endpoints import REPO
from icesink.runtime import faults
from tests.support.wait import wait_until


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


def tail(log: Path) -> str:
    return log.read_text()[-3000:]


def while_running(job: subprocess.Popen[str], log: Path, done: Callable[[], bool]) -> Callable[[], bool]:
    """`done`, failing at once (with the log's tail) when the job exited before it came true."""

    def check() -> bool:
        if done():
            return True
        assert job.poll() is None, f"the job exited ({job.returncode}):\n{tail(log)}"
        return False

    return check


def paused(release: Path, job: subprocess.Popen[str], log: Path) -> None:
    """Until the job stops at its pause point (the fault hook then writes `{release}.reached`)."""
    reached = Path(f"{release}.reached")
    wait_until(while_running(job, log, reached.exists), 300, lambda: f"{reached}:\n{tail(log)}", interval=0.3)


def finish(job: subprocess.Popen[str], log: Path, timeout: float = 400) -> str:
    try:
        job.wait(timeout=timeout)
    finally:
        if job.poll() is None:
            job.kill()
    return log.read_text()


def pause_env(tmp_path: Path, point: str, batch: int) -> tuple[dict[str, str], Path]:
    release = tmp_path / "release"
    return {faults.PAUSE_ENV: f"{point}:{batch}", faults.PAUSE_FILE_ENV: str(release)}, release


def stack(*args: str) -> None:
    """`dev/stack ...` (stop or start one service)."""
    subprocess.run([str(REPO / "dev" / "stack"), *args], check=True, timeout=300, capture_output=True)
