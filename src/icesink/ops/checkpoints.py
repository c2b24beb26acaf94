"""The job's Spark checkpoint folder, as the reset command handles it: moved aside (never
deleted), and a starting-offsets file next to it that the next `icesink run` starts from."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from icesink.errors import CheckpointError

STARTING_SUFFIX = ".starting-offsets.json"


def _local(location: str) -> Path:
    if location.startswith("file://"):
        return Path(location[len("file://") :])
    if "://" in location:
        raise CheckpointError(
            f"checkpoint {location} is not on the local file system: move it aside with your storage's tools, "
            "then start the job with the printed starting offsets (kafka.starting_offsets)"
        )
    return Path(os.path.expanduser(location))


def ensure_local(location: str) -> None:
    """Raises, naming what to do, when the checkpoint is not a local folder the reset can move."""
    _local(location)


def move_aside(location: str, now: dt.datetime | None = None) -> Path | None:
    """Renames the checkpoint folder to `<name>.moved-<UTC time>`; returns the new path."""
    path = _local(location)
    if not path.exists():
        return None
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.moved-{stamp}")
    path.rename(target)
    return target


def starting_file(location: str) -> Path:
    path = _local(location)
    return path.with_name(path.name + STARTING_SUFFIX)


def write_starting(location: str, spark_json: str) -> Path:
    f = starting_file(location)
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_name(f.name + ".tmp")
    tmp.write_text(spark_json + "\n")
    tmp.replace(f)
    return f


def read_starting(location: str) -> str | None:
    """The starting offsets a reset left for a fresh checkpoint, or None."""
    if "://" in location and not location.startswith("file://"):
        return None
    f = starting_file(location)
    return f.read_text() if f.is_file() else None


def mark_applied(location: str, now: dt.datetime | None = None) -> None:
    f = starting_file(location)
    if f.is_file():
        stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
        f.rename(f.with_name(f"{f.name}.applied-{stamp}"))
