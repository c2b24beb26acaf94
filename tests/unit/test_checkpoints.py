from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from icesink.config import S3Config
from icesink.errors import CheckpointError
from icesink.ops import checkpoints

NOW = dt.datetime(2026, 11, 27, 10, 0, 0, tzinfo=dt.UTC)


def test_a_local_checkpoint_is_moved_aside_and_the_starting_offsets_left_next_to_it(tmp_path: Path) -> None:
    cp = tmp_path / "cp"
    (cp / "offsets").mkdir(parents=True)
    (cp / "offsets" / "0").write_text("v1")
    moved = checkpoints.move_aside(str(cp), S3Config(), NOW)
    assert moved == str(tmp_path / "cp.moved-20261127T100000Z")
    assert (Path(moved) / "offsets" / "0").read_text() == "v1"
    assert not cp.exists()
    assert checkpoints.move_aside(str(cp), S3Config(), NOW) is None, "nothing left to move"

    written = checkpoints.write_starting(str(cp), '{"t":{"0":5}}', S3Config())
    assert written == str(tmp_path / "cp.starting-offsets.json")
    assert checkpoints.read_starting(str(cp), S3Config()) == '{"t":{"0":5}}\n'
    checkpoints.mark_applied(str(cp), S3Config(), NOW)
    assert checkpoints.read_starting(str(cp), S3Config()) is None
    assert (tmp_path / "cp.starting-offsets.json.applied-20261127T100000Z").is_file()


def test_other_storage_is_refused_with_what_to_do() -> None:
    with pytest.raises(CheckpointError, match=r"hdfs://nn/cp: icesink moves checkpoints on local disk and S3"):
        checkpoints.ensure_supported("hdfs://nn/cp", S3Config())


def test_an_s3a_checkpoint_is_a_path_in_its_bucket() -> None:
    here = checkpoints.place("s3a://warehouse/checkpoints/job/", S3Config(endpoint="http://127.0.0.1:7070"))
    assert here.on_s3
    assert here.path == "warehouse/checkpoints/job"
    assert here.sibling("job.moved-x").uri == "s3a://warehouse/checkpoints/job.moved-x"
