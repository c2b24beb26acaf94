"""The exceptions icesink raises: one class per condition. Each message names the topic, partition,
offset or table at fault and, where there is one, the command that fixes it.

The command line prints the message of any `IcesinkError` and exits 1. Which failures the job waits
out (an outage) and which end it (the data, the config, a fenced commit) is decided in
`icesink.runtime.retries`, by the classes of an error's causes.

    IcesinkError
      ConfigError                the config file, an override or a table's settings
      UsageError                 a command-line argument
      RoutingError               a topic or field value that makes no table name
      DecodeError                records that cannot be decoded under `on_error: fail`
      SchemaConflictError        a record schema its table cannot evolve to
      WriteError                 a table's files could not be written
      CommitError                a table commit refused or contradicted
        CommitOutcomeUnknownError  the catalog did not confirm, the table does not hold it
      OffsetsError               offsets that cannot be read or do not fit Kafka's log
      ResetRefusedError          an offsets reset that would re-ingest without --rewind
      CheckpointError            a checkpoint the command cannot handle
      TopicNotFoundError         a named topic that Kafka does not have
      TableNotFoundError         a named table that the catalog does not have
      SchemaNotFoundError        a schema id the registry does not know
      KafkaUnavailableError      Kafka's brokers did not answer the admin client
      CatalogUnavailableError    the Iceberg REST catalog did not answer (the CLI's PyIceberg)
      RegistryUnavailableError   the Schema Registry kept failing
      RegistryAuthError          the Schema Registry refused the credentials
      MaintenanceError           a maintenance procedure failed
      TableReadError             a table's files could not be read (the CLI's live row count)
      JobFailedError             the streaming query ended for a cause that is not ours
      UnsupportedSparkError      Spark's internals are not what icesink relies on (a Spark version it does not know)
      BatchAbandonedError        a batch given up before its commit because the job is stopping (not a failure)
"""

from __future__ import annotations


class IcesinkError(Exception):
    """Base class of every error icesink raises on purpose."""


class ConfigError(IcesinkError):
    """The configuration file or an override is invalid, or a table's settings do not fit its rows."""


class UsageError(IcesinkError):
    """A command-line argument has a value the command cannot use (e.g. --to-timestamp that is not an
    ISO time, an age that is not like 12h)."""


class RoutingError(IcesinkError):
    """A topic cannot be mapped to a valid table name."""


class DecodeError(IcesinkError):
    """Records of a batch could not be decoded; the batch is not committed."""


class WriteError(IcesinkError):
    """Writing a table's files failed on the executors; nothing of the batch was committed."""


class CommitError(IcesinkError):
    """A table commit was refused or its outcome contradicts the offsets we planned with."""


class CommitOutcomeUnknownError(CommitError):
    """The catalog did not confirm a commit and the table does not hold it: safe to retry."""


class RegistryUnavailableError(IcesinkError):
    """The Schema Registry could not be reached or kept failing; the batch fails, nothing is committed."""


class RegistryAuthError(IcesinkError):
    """The Schema Registry refused the configured credentials (HTTP 401 or 403)."""


class SchemaNotFoundError(IcesinkError):
    """The registry does not know a schema id that records carry (their records are dead letters)."""


class OffsetsError(IcesinkError):
    """Offsets stored in a snapshot summary cannot be read, or a table holds offsets beyond Kafka's log."""


class SchemaConflictError(IcesinkError):
    """A record schema that cannot evolve its table (e.g. string -> int) under the `fail` policy."""


class ResetRefusedError(IcesinkError):
    """`icesink offsets reset` would restart below offsets that tables hold, and --rewind was not given:
    the job would drop the re-read records. Nothing was changed."""


class CheckpointError(IcesinkError):
    """The job's checkpoint is not somewhere the command can move it (not on the local file system)."""


class TopicNotFoundError(IcesinkError):
    """A topic named on the command line does not exist or does not match kafka.subscribe_pattern."""


class TableNotFoundError(IcesinkError):
    """A table named on the command line (--table) is not in the namespace."""


class KafkaUnavailableError(IcesinkError):
    """Kafka's brokers could not be asked for topics or offsets (the admin client, not the stream).
    Whether the job waits it out depends on the client's error, which is its cause."""


class CatalogUnavailableError(IcesinkError):
    """The Iceberg REST catalog could not be reached or listed (the commands' PyIceberg client)."""


class MaintenanceError(IcesinkError):
    """A maintenance procedure (compaction, expiry, orphan removal) failed on a table."""


class TableReadError(IcesinkError):
    """A table's data or delete files could not be read (`icesink status` counting live rows)."""


class JobFailedError(IcesinkError):
    """The streaming query ended for a cause that is not one of icesink's own errors (a Spark or JVM
    failure); the message carries the cause and, when it can tell, what to do."""


class UnsupportedSparkError(IcesinkError):
    """Spark's or Iceberg's internals that icesink reads (the Kafka source's offset ranges) are not
    what it was built against: fail before anything is committed rather than guess."""


class BatchAbandonedError(IcesinkError):
    """The job was asked to stop (SIGTERM, Ctrl-C) before this batch committed anything: Spark
    replays it on the next run. The job stops with exit code 0, not as a failure."""


def first_line(e: BaseException) -> str:
    """The first line of `e`'s message (a Java exception's runs on with its stack), or its class's
    name when it has none: what a log line that goes on says of a failure."""
    text = str(e)
    return text.splitlines()[0] if text else type(e).__name__
