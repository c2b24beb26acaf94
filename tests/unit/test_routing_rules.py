from __future__ import annotations

import pytest

from icesink.config import RouteRule
from icesink.errors import RoutingError
from icesink.model import TableRef
from icesink.routing import Router, dynamic_table, route, strip_daily_suffix, table_name_for


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


def rules(*raw: dict[str, object]) -> list[RouteRule]:
    return [RouteRule.model_validate(r) for r in raw]


def test_named_groups_pick_namespace_and_table() -> None:
    router = Router(rules({"topics": r"(?P<namespace>[a-z]+)\.(?P<table>[a-z_]+)\.\d{8}"}), "raw")
    assert router.route("shop.orders.20240102").tables == (TableRef("shop", "orders"),)
    # Topics no rule matches keep the default: daily suffix stripped, tables.namespace.
    assert router.route("clicks.20240102").tables == (TableRef("raw", "clicks"),)


def test_templates_fan_one_topic_out_and_several_topics_in() -> None:
    router = Router(
        rules(
            {"topics": r"orders-(?P<region>eu|us)", "tables": ["orders", "orders_{region}"], "namespace": "sales"},
            {"topics": r"(legacy_)?payments.*", "tables": ["payments"]},
        ),
        "raw",
    )
    assert router.route("orders-eu").tables == (TableRef("sales", "orders"), TableRef("sales", "orders_eu"))
    assert (
        router.route("payments_v2").tables == router.route("legacy_payments").tables == (TableRef("raw", "payments"),)
    )


def test_static_and_dynamic_field_routing() -> None:
    router = Router(
        rules(
            {"topics": "mixed", "field": "kind", "values": {"click": ["clicks"], "buy": ["orders", "audit"]}},
            {"topics": "inbox", "field": "target", "dynamic": True, "unknown_tables": "dead-letter"},
        ),
        "raw",
    )
    mixed = router.route("mixed")
    assert (mixed.field, mixed.dynamic) == ("kind", False)
    assert mixed.static_targets("buy") == (TableRef("raw", "orders"), TableRef("raw", "audit"))
    assert mixed.static_targets("other") == ()
    inbox = router.route("inbox")
    assert (inbox.field, inbox.dynamic_namespace) == ("target", "raw")


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("Orders", "orders"),
        (" events_2 ", "events_2"),
        ("../etc/passwd", None),
        ("other_ns.orders", None),
        ("orders; DROP TABLE x", None),
        ("`quoted`", None),
        ("9lives", None),
        ("", None),
        (None, None),
        ("x" * 129, None),
    ],
)
def test_dynamic_table_names_are_validated(value: str | None, name: str | None) -> None:
    assert dynamic_table(value) == name


def test_a_template_that_renders_a_bad_name_is_a_routing_error() -> None:
    router = Router(rules({"topics": r"(?P<table>.+)", "tables": ["{table}"]}), "raw")
    with pytest.raises(RoutingError, match=r"topic a\.b \(routing rule 1.*not a valid name"):
        router.route("a.b")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"topics": "t", "values": {"a": ["x"]}}, "need `field`"),
        ({"topics": "t", "field": "f"}, "needs `values`"),
        ({"topics": "t", "field": "f", "dynamic": True, "values": {"a": ["x"]}}, "not both"),
        ({"topics": "t", "tables": ["{nope}"]}, "not named groups"),
        ({"topics": "(", "tables": ["x"]}, "not a valid regular expression"),
    ],
)
def test_rules_are_checked_at_start_up(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RouteRule.model_validate(raw)
