"""A class-data-sharing archive of the job's driver JVM, for the job processes tests start.

Every `icesink run` a test starts (the fault suite starts about 70) is a new driver JVM that loads
the classes of Spark, Iceberg, Hadoop and Kafka before its first batch, and compiles them with
both JIT tiers. Measured on the 2-core machine, a 10-record job: 32 s end to end; with the
classes mapped from an archive an earlier run made (the JDK's AppCDS, `-XX:SharedArchiveFile`)
and the C1 compiler alone (a test job's few records never pay back C2), 18.5 s.

The archive is made once per machine, Java and classpath, paths included (`archive_key`: a clone
elsewhere has its own): one small job run with `-XX:ArchiveClassesAtExit`, kept in the cache with
the two others used last. A JVM whose classpath does not match an archive warns (on stderr:
icesink.job.session.DRIVER_LOG_OPTIONS; a `maintain` job, whose classpath is shorter, always does)
and runs without it, so a stale one costs speed, never a result. Test processes only: the options
reach a job through its written config (`Scenario.write_config`), never the product's defaults.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from icesink.job.session import JARS_ENV  # the stack's extra jars, on the driver's classpath too

ENV = "ICESINK_TEST_JAVA_OPTIONS"  # the options test job processes get (set by the tests' session)
CACHE = Path(os.environ.get("ICESINK_CACHE", Path.home() / ".cache" / "icesink"))
C1_ONLY = "-XX:TieredStopAtLevel=1"


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def archive_path() -> Path:
    """Where the archive of this machine's Java and driver classpath is (made or not)."""
    version = subprocess.run([_java(), "-version"], capture_output=True, text=True, timeout=60).stderr
    return CACHE / "cds" / f"driver-{archive_key(version, classpath_folders())}.jsa"


def classpath_folders() -> list[Path]:
    """The folders of the driver's jars: pyspark's, and the stack's extra jars when set."""
    import pyspark

    extra = os.environ.get(JARS_ENV)
    return [Path(pyspark.__file__).parent / "jars", *([Path(extra)] if extra else [])]


def archive_key(java_version: str, folders: list[Path]) -> str:
    """The key of an archive: Java's version and the jars of the driver's classpath, by path, name,
    size and modification time. The JVM maps an archive only for the classpath it was made with, paths included: a
    clone elsewhere (CI's) has its own pyspark jars and needs its own archive, or every job of its
    run warns and goes without one (which CI did, unseen, until the key had the paths)."""
    key = hashlib.sha256(java_version.encode())
    for folder in folders:
        key.update(str(folder.resolve()).encode())
        for jar in sorted(folder.glob("*.jar")):  # the JVM checks each jar's size and time too
            stat = jar.stat()
            key.update(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return key.hexdigest()[:16]


def making_options(target: Path) -> str:
    """The options of the job run that makes the archive at `target`."""
    return f"-XX:ArchiveClassesAtExit={target} {C1_ONLY}"


def using_options(archive: Path) -> str:
    """The options of a job run that maps its classes from `archive`."""
    return f"-XX:SharedArchiveFile={archive} {C1_ONLY}"


def options_now(options: str) -> str:
    """`options` (`using_options`'s) as a job started now gets them: the archive is made while the
    session's first tests run (tests/integration/conftest.py), and a job started before it is
    there gets C1 alone, not a missing archive's warning."""
    for option in options.split():
        if option.startswith("-XX:SharedArchiveFile=") and not Path(option.split("=", 1)[1]).exists():
            return " ".join(o for o in options.split() if o != option)
    return options


def keep_recent(used: Path, most: int = 3) -> None:
    """Marks `used` as used now and deletes all but the `most` archives used last: each clone's
    path has its own (~200 MB), and CI clones anew. A job already mapping a deleted one keeps it;
    a job started later without it warns and runs without one."""
    if used.exists():
        os.utime(used)
    archives = sorted(used.parent.glob("driver-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[most:]:
        old.unlink(missing_ok=True)
