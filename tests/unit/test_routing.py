from __future__ import annotations

import pytest

from icesink.errors import RoutingError
from icesink.routing import TableRef, route, strip_daily_suffix, table_name_for


@pytest.mark.parametrize(
    ("topic", "base"),
    [
        ("events.20240102", "events"),
        ("events_20240102", "events"),
        ("events-20240102", "events"),
        ("shop.orders.20241231", "shop.orders"),
        ("events", "events"),
        ("events.2024010", "events.2024010"),  # 7 digits: not a date
        ("events.20241350", "events.20241350"),  # month 13: not a date
        ("events20240102", "events20240102"),  # no separator
        ("20240102", "20240102"),
    ],
)
def test_strip_daily_suffix(topic: str, base: str) -> None:
    assert strip_daily_suffix(topic) == base


def test_daily_topics_share_a_table() -> None:
    names = {route(t, "raw") for t in ["events.20240102", "events_20240103", "events-20240104"]}
    assert names == {TableRef("raw", "events")}


@pytest.mark.parametrize(
    ("topic", "table"),
    [("Shop.Orders-v2.20240101", "shop_orders_v2"), ("9lives", "t_9lives"), ("a..b", "a_b")],
)
def test_table_names_are_sql_identifiers(topic: str, table: str) -> None:
    assert table_name_for(topic) == table


def test_topic_without_usable_name_is_refused() -> None:
    with pytest.raises(RoutingError, match=r"topic '\.\.\.'"):
        table_name_for("...")


def test_qualified_name() -> None:
    assert TableRef("raw", "events").qualified("lake") == "lake.raw.events"
