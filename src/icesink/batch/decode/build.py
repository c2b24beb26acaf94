"""The decoders a job's config asks for, value and key."""

from __future__ import annotations

from pyspark.sql import SparkSession

from icesink.batch.decode import KEY, Decoder
from icesink.batch.decode.avro import AvroDecoder
from icesink.batch.decode.debezium import EnvelopeSpec
from icesink.batch.decode.json import JsonDecoder
from icesink.config import Config, Envelope, KeyFormat, ValueFormat
from icesink.kafka.registry import RegistrySettings, SchemaRegistry, registry_for


def _registry(config: Config) -> SchemaRegistry:
    reg = config.decode.registry
    assert reg is not None  # the config validator guarantees it
    cert = (reg.certificate_location, reg.key_location) if reg.certificate_location and reg.key_location else None
    settings = RegistrySettings(
        url=reg.url,
        username=reg.username,
        password=reg.password.get_secret_value() if reg.password else None,
        verify=reg.ca_location or True,
        cert=cert,
        timeout_s=reg.timeout_s,
        attempts=reg.attempts,
    )
    return registry_for(settings)


def build_decoder(spark: SparkSession, config: Config) -> Decoder:
    envelope = None
    if config.decode.envelope is Envelope.DEBEZIUM:
        envelope = EnvelopeSpec(config.decode.operation_column, tuple(config.decode.source_columns))
    if config.decode.format is ValueFormat.AVRO:
        return AvroDecoder(_registry(config), envelope)
    return JsonDecoder(spark, envelope)


def build_key_decoder(spark: SparkSession, config: Config) -> Decoder | None:
    """The decoder of record keys, or None when keys are not decoded or are plain strings."""
    if config.decode.key_format is KeyFormat.AVRO:
        return AvroDecoder(_registry(config), src=KEY)
    if config.decode.key_format is KeyFormat.JSON:
        return JsonDecoder(spark, src=KEY)
    return None
