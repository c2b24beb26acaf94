"""The job's metrics (`job.metrics`): names made of tables and topics, and the lag read from the
query's progress."""

from __future__ import annotations

from icesink.job.metrics import kafka_lag, metric_part
from icesink.model import TopicPartition as TP


def test_lag_is_the_latest_offset_past_the_batch_end_per_partition() -> None:
    end = '{"events.20240102": {"0": 100, "1": 40}, "gone": {"0": 5}}'
    latest = '{"events.20240102": {"0": 130, "1": 40, "2": 7}}'
    assert kafka_lag(end, latest) == {TP("events.20240102", 0): 30, TP("events.20240102", 1): 0}
    assert kafka_lag(None, latest) == {}


def test_a_metric_name_part_keeps_letters_digits_dashes_and_underscores() -> None:
    assert metric_part("demo.events") == "demo_events"
    assert metric_part("cdc.public.orders-v2") == "cdc_public_orders-v2"


def test_lag_takes_the_offsets_parsed_as_the_query_progress_gives_them() -> None:
    assert kafka_lag({"t": {"0": 10}}, {"t": {"0": 25}}) == {TP("t", 0): 15}
