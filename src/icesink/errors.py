"""The exceptions icesink raises. Each one names the topic, partition, offset or table at fault."""

from __future__ import annotations


class IcesinkError(Exception):
    """Base class of every error icesink raises on purpose."""


class ConfigError(IcesinkError):
    """The configuration file or an override is invalid."""


class RoutingError(IcesinkError):
    """A topic cannot be mapped to a valid table name."""


class DecodeError(IcesinkError):
    """Records of a batch could not be decoded; the batch is not committed."""


class WriteError(IcesinkError):
    """Writing a table's files failed on the executors; nothing of the batch was committed."""


class CommitError(IcesinkError):
    """A table commit was refused or its outcome contradicts the offsets we planned with."""


class RegistryUnavailableError(IcesinkError):
    """The Schema Registry could not be reached or kept failing; the batch fails, nothing is committed."""


class SchemaNotFoundError(IcesinkError):
    """The registry does not know a schema id that records carry (their records are dead letters)."""


class OffsetsError(IcesinkError):
    """Offsets stored in a snapshot summary cannot be read."""


class SchemaConflictError(IcesinkError):
    """A record schema that cannot evolve its table (e.g. string -> int) under the `fail` policy."""


class CommitOutcomeUnknownError(CommitError):
    """The catalog did not confirm a commit and the table does not hold it: safe to retry."""
