"""Outbound webhooks' pure rules: the retry schedule, the policy's and settings' bounds, the
delivery machine, the signature scheme (checked against a plain HMAC), which URLs a
subscription takes, and the outbox trigger's list of types."""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app.core.config import WebhookSettings
from app.core.errors import InvalidTransition
from app.core.signatures import sign, signature_header
from app.core.states import DELIVERY_ALLOWED, DeliveryStatus, check_delivery_transition
from app.core.vocabulary import WebhookEventType
from app.webhooks.engine.policy import DeliveryPolicy, retry_delay
from app.webhooks.schemas import WebhookCreate

MIGRATION = Path(__file__).parents[2] / "migrations" / "versions" / "0012_webhooks.py"


@pytest.mark.parametrize(
    ("attempt", "delay_s"), [(1, 15), (2, 30), (3, 60), (4, 120), (5, None), (9, None)]
)
def test_retries_wait_15_s_doubling_and_stop_after_the_fifth_attempt(
    attempt: int, delay_s: int | None
) -> None:
    expected = None if delay_s is None else timedelta(seconds=delay_s)
    assert retry_delay(DeliveryPolicy(), attempt) == expected


def test_the_schedule_is_configurable() -> None:
    policy = DeliveryPolicy(max_attempts=3, backoff_base_s=2, backoff_factor=3)
    assert [retry_delay(policy, n) for n in (1, 2, 3)] == [
        timedelta(seconds=2),
        timedelta(seconds=6),
        None,
    ]
    assert DeliveryPolicy.from_settings(WebhookSettings(max_attempts=3)).max_attempts == 3


@pytest.mark.parametrize(
    "options",
    [
        {"max_attempts": 0},
        {"backoff_base_s": -1},
        {"backoff_factor": 0.5},
        {"timeout_s": 0},
        {"timeout_s": 60, "lease_s": 60},  # an attempt must end before its lease
        {"concurrency": 0},
        {"excerpt_chars": -1},
        {"allowed_networks": ("10.0.0.1/8",)},
        {"allowed_networks": "127.0.0.0/8"},
    ],
)
def test_a_policy_refuses_unsafe_values(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 (each option has its own message)
        DeliveryPolicy(**options)


@pytest.mark.parametrize(
    "values",
    [
        {"timeout_s": 30, "lease_s": 20},
        {"allowed_networks": ["not a network"]},
        {"max_attempts": 0},
    ],
)
def test_settings_refuse_unsafe_values(values: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        WebhookSettings(**values)


def test_a_settled_delivery_may_only_go_back_to_pending() -> None:
    assert DELIVERY_ALLOWED[DeliveryStatus.SUCCEEDED] == {DeliveryStatus.PENDING}
    assert DELIVERY_ALLOWED[DeliveryStatus.DEAD_LETTER] == {DeliveryStatus.PENDING}
    check_delivery_transition(DeliveryStatus.DEAD_LETTER, DeliveryStatus.PENDING)
    check_delivery_transition(DeliveryStatus.PENDING, DeliveryStatus.SUCCEEDED)
    with pytest.raises(InvalidTransition, match="waiting for its next attempt"):
        check_delivery_transition(DeliveryStatus.PENDING, DeliveryStatus.PENDING)
    with pytest.raises(InvalidTransition):
        check_delivery_transition(DeliveryStatus.SUCCEEDED, DeliveryStatus.DEAD_LETTER)


def test_the_signature_is_a_plain_hmac_of_the_timestamp_and_the_body() -> None:
    body = b'{"id":"whd_1","type":"agent_run.completed"}'
    expected = hmac.new(b"whsec_k", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert sign("whsec_k", 1700000000, body) == expected
    assert signature_header("whsec_k", 1700000000, body) == f"t=1700000000,v1={expected}"
    assert sign("whsec_k", 1700000001, body) != expected


@pytest.mark.parametrize(
    ("url", "accepted"),
    [
        ("https://hooks.example.com/in?x=1", True),
        ("HTTP://example.com", True),
        ("http://example.com:8080/a", True),
        ("http://[2001:db8::1]/a", True),
        ("ftp://example.com/", False),
        ("https://example.com:0/", False),
        ("https://example.com:70000/", False),
        ("https://u@example.com/", False),
        ("https:///path", False),
        ("https://exa mple.com/", False),
        ("//example.com/", False),
        ("http://[1.2.3.4]/", False),
        ("http://[::1]:65535/", True),
    ],
)
def test_which_urls_a_subscription_takes(url: str, accepted: bool) -> None:
    body = {"url": url, "event_types": ["agent_run.completed"]}
    if accepted:
        assert WebhookCreate.model_validate(body).url == url
    else:
        with pytest.raises(ValidationError):
            WebhookCreate.model_validate(body)


def test_event_types_listed_twice_count_once() -> None:
    body = {"url": "https://example.com", "event_types": ["trigger.fired", "trigger.fired"]}
    assert WebhookCreate.model_validate(body).event_types == [WebhookEventType.TRIGGER_FIRED]


def test_the_outbox_trigger_lists_every_subscribable_type_and_none_of_its_own() -> None:
    spec = importlib.util.spec_from_file_location("migration_0012", MIGRATION)
    assert spec is not None and spec.loader is not None
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    assert set(migration.SUBSCRIBABLE) == {t.value for t in WebhookEventType}
    assert not any(t.startswith("webhook.") for t in migration.SUBSCRIBABLE)
