"""The job's Spark checkpoint, as the reset command handles it: moved aside (never deleted), and a
starting-offsets file next to it that the next `icesink run` starts from.

A checkpoint is a local folder or lives on the tables' S3 (`s3a://bucket/path`, reached with the
one `s3` config section). S3 has no rename: moving a checkpoint aside there copies every object
to `<name>.moved-<UTC time>/` and then deletes the originals. Run again after an interruption, it
copies what is left to a new folder: the checkpoint ends up aside either way (the reset's offsets
come from the tables, not from it), and a partial copy is only a folder to delete.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from dataclasses import dataclass

import pyarrow.fs as pafs

from icesink.config import S3Config
from icesink.errors import CheckpointError
from icesink.tasks.storage import StorageSettings

STARTING_SUFFIX = ".starting-offsets.json"
_S3 = ("s3a", "s3", "s3n")


@dataclass(frozen=True)
class Place:
    """A checkpoint (or a file next to it): its file system, its path there, and its URI."""

    fs: pafs.FileSystem
    path: str
    uri: str

    @property
    def on_s3(self) -> bool:
        return self.uri.partition("://")[0] in _S3

    def sibling(self, name: str) -> Place:
        """`name` in the same folder."""
        return Place(self.fs, _join(_parent(self.path), name), _join(_parent(self.uri), name))

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def kind(self) -> pafs.FileType:
        return self.fs.get_file_info(self.path).type


def place(location: str, s3: S3Config) -> Place:
    """Where `location` is: a local path, file://, or s3a:// (s3://) on the tables' S3."""
    scheme, sep, rest = location.partition("://")
    if not sep or scheme == "file":
        path = os.path.abspath(os.path.expanduser(rest if sep else location))
        return Place(pafs.LocalFileSystem(), path, path)
    if scheme not in _S3:
        raise CheckpointError(
            f"checkpoint {location}: icesink moves checkpoints on local disk and S3 (s3a://) only; move it "
            "aside with your storage's tools, then start the job with the printed starting offsets "
            "(kafka.starting_offsets)"
        )
    fs, path = StorageSettings.of(s3).filesystem_for(location)
    return Place(fs, path.rstrip("/"), location.rstrip("/"))


def ensure_supported(location: str, s3: S3Config) -> None:
    """Raises, naming what to do, when the reset cannot move the checkpoint; before anything changes."""
    place(location, s3)


def move_aside(location: str, s3: S3Config, now: dt.datetime | None = None) -> str | None:
    """Moves the checkpoint to `<name>.moved-<UTC time>`; returns where, or None if there is none."""
    here = place(location, s3)
    if here.kind() != pafs.FileType.Directory:
        return None
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    there = here.sibling(f"{here.name}.moved-{stamp}")
    if not here.on_s3:
        here.fs.move(here.path, there.path)
        return there.uri
    files = [f for f in here.fs.get_file_info(pafs.FileSelector(here.path, recursive=True)) if f.is_file]
    print(
        f"checkpoint {here.uri}: S3 has no rename; copying its {len(files)} object(s) to {there.uri}, then "
        "deleting them (safe to run again if interrupted)",
        file=sys.stderr,
    )
    for f in files:
        here.fs.copy_file(f.path, there.path + f.path[len(here.path) :])
    _delete_tree(here)
    return there.uri


def _delete_tree(here: Place) -> None:
    """Deletes every object under `here`, then the folders' marker objects, deepest first: S3
    servers on a file system (MinIO, versitygw) refuse to delete a folder that is not empty, and
    a bulk delete does not say in which order it goes."""
    found = here.fs.get_file_info(pafs.FileSelector(here.path, recursive=True, allow_not_found=True))
    for f in found:
        if f.is_file:
            here.fs.delete_file(f.path)
    folders = [f.path for f in found if f.type == pafs.FileType.Directory] + [here.path]
    for folder in sorted(folders, key=lambda p: p.count("/"), reverse=True):
        if here.fs.get_file_info(folder).type == pafs.FileType.Directory:
            here.fs.delete_dir(folder)


def starting_file(location: str, s3: S3Config) -> Place:
    here = place(location, s3)
    return here.sibling(here.name + STARTING_SUFFIX)


def write_starting(location: str, spark_json: str, s3: S3Config) -> str:
    """Leaves the starting offsets next to the checkpoint; returns the file's URI."""
    f = starting_file(location, s3)
    if not f.on_s3:
        f.fs.create_dir(_parent(f.path), recursive=True)
    # Written whole, then moved into place locally; an S3 object appears whole anyway.
    tmp = f.path if f.on_s3 else f.path + ".tmp"
    with f.fs.open_output_stream(tmp) as out:
        out.write((spark_json + "\n").encode())
    if tmp != f.path:
        f.fs.move(tmp, f.path)
    return f.uri


def read_starting(location: str, s3: S3Config) -> str | None:
    """The starting offsets a reset left for a fresh checkpoint, or None."""
    f = starting_file(location, s3)
    if f.kind() != pafs.FileType.File:
        return None
    with f.fs.open_input_stream(f.path) as src:
        return bytes(src.read()).decode()


def mark_applied(location: str, s3: S3Config, now: dt.datetime | None = None) -> None:
    """Retires the starting-offsets file once Spark's checkpoint holds the offsets."""
    f = starting_file(location, s3)
    if f.kind() != pafs.FileType.File:
        return
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    done = f.sibling(f"{f.name}.applied-{stamp}")
    if f.on_s3:
        f.fs.copy_file(f.path, done.path)
        f.fs.delete_file(f.path)
    else:
        f.fs.move(f.path, done.path)


def _parent(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[0]


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}"
