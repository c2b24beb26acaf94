"""Where and how executors reach object storage (S3, or local files in tests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

if TYPE_CHECKING:  # a task needs none of the config (icesink/modes.py says why)
    from icesink.config import S3Config


@dataclass(frozen=True)
class StorageSettings:
    """Where and how executors reach object storage. Secrets are kept out of repr()."""

    endpoint: str | None = None
    region: str = "us-east-1"
    path_style_access: bool = True
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, s3: S3Config) -> StorageSettings:
        """The settings of the config's `s3` section (keys from it or the environment)."""
        access, secret = s3.resolved_keys()
        return cls(s3.endpoint, s3.region, s3.path_style_access, access, secret)

    def filesystem_for(self, uri: str) -> tuple[pafs.FileSystem, str]:
        """The pyarrow filesystem and in-filesystem path of `uri` (s3://, s3a://, file:// or a local path)."""
        scheme, sep, rest = uri.partition("://")
        if not sep or scheme == "file":
            return pafs.LocalFileSystem(), (rest if sep else uri)
        if scheme not in ("s3", "s3a", "s3n"):
            raise ValueError(f"unsupported storage scheme in {uri!r}")
        kwargs: dict[str, object] = {
            "region": self.region,
            "force_virtual_addressing": not self.path_style_access,
            # A file is uploaded at its close, in one PutObject when it is smaller than a part (most
            # of a batch's files). Opened at once, each file was a multipart upload of three
            # requests (create, one part, complete): 10-20 -> 4 ms a file against the local stack;
            # a 200-table batch's files 600 requests -> 200. A failure to open (a missing bucket,
            # refused keys) then surfaces at the write or the close, which fail the task naming the
            # object (tests/integration/test_task_storage.py).
            "allow_delayed_open": True,
        }
        if self.endpoint:
            ep_scheme, _, host = self.endpoint.partition("://")
            kwargs["endpoint_override"] = host or ep_scheme
            kwargs["scheme"] = ep_scheme if host else "https"
        if self.access_key_id and self.secret_access_key:
            kwargs["access_key"] = self.access_key_id
            kwargs["secret_key"] = self.secret_access_key
        return pafs.S3FileSystem(**kwargs), rest
