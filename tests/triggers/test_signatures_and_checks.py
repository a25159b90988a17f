"""Webhook signatures (Stripe's scheme) checked against an injected clock, and what a
trigger must satisfy when saved: its config by kind, its target by the target's kind, and
the first fire time a schedule is armed with."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any

import pytest

from app.core.errors import ValidationFailed
from app.core.signatures import (
    SignatureExpired,
    SignatureInvalid,
    SignatureMissing,
    parse_header,
    sign,
    signature_header,
    verify,
)
from app.core.vocabulary import TriggerKind
from app.triggers.engine.checks import check_config, check_target
from app.triggers.engine.kinds.schedule import SCHEDULE
from app.triggers.engine.kinds.webhook import WEBHOOK
from app.triggers.schemas import ScheduleConfig, TriggerRead

SECRET = "whsec_test"
BODY = b'{"hello": "world"}'
NOW = 1_800_000_000


def test_a_signature_made_by_sign_verifies_within_the_tolerance() -> None:
    header = signature_header(SECRET, NOW, BODY)
    assert header == f"t={NOW},v1={sign(SECRET, NOW, BODY)}"
    for now in (NOW, NOW + 300, NOW - 300):
        assert verify(SECRET, header, BODY, now=now, tolerance_s=300) == sign(SECRET, NOW, BODY)


def test_the_signed_message_is_the_timestamp_a_dot_and_the_body() -> None:
    """What a sender computes with openssl or any HMAC library."""
    expected = hmac.new(b"secret", b"1.{}", hashlib.sha256).hexdigest()
    assert sign("secret", 1, b"{}") == expected


@pytest.mark.parametrize(
    ("header", "body", "error"),
    [
        (None, BODY, SignatureMissing),
        ("  ", BODY, SignatureMissing),
        ("v1=abc", BODY, SignatureInvalid),  # no timestamp
        (f"t={NOW}", BODY, SignatureInvalid),  # no signature
        (f"t=soon,v1={sign(SECRET, NOW, BODY)}", BODY, SignatureInvalid),
        (signature_header("another", NOW, BODY), BODY, SignatureInvalid),
        (signature_header(SECRET, NOW, BODY), BODY + b" ", SignatureInvalid),
        (
            signature_header(SECRET, NOW + 1, BODY).replace(f"t={NOW + 1}", f"t={NOW}"),
            BODY,
            SignatureInvalid,
        ),  # the timestamp is signed
        ("t=1," + "v1=" + "a" * 3000, BODY, SignatureInvalid),  # too long
        (signature_header(SECRET, NOW - 301, BODY), BODY, SignatureExpired),
        (signature_header(SECRET, NOW + 301, BODY), BODY, SignatureExpired),
    ],
)
def test_refusals(header: str | None, body: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        verify(SECRET, header, body, now=NOW, tolerance_s=300)


def test_an_expired_signature_says_by_how_much() -> None:
    with pytest.raises(SignatureExpired) as caught:
        verify(SECRET, signature_header(SECRET, NOW - 400, BODY), BODY, now=NOW, tolerance_s=300)
    assert "400 s old" in caught.value.detail
    assert caught.value.extensions() == {"timestamp": NOW - 400, "tolerance_s": 300}
    assert caught.value.headers() == {}
    with pytest.raises(SignatureExpired) as ahead:
        verify(SECRET, signature_header(SECRET, NOW + 400, BODY), BODY, now=NOW, tolerance_s=300)
    assert "400 s ahead" in ahead.value.detail


def test_any_of_several_signatures_may_match_and_other_schemes_are_ignored() -> None:
    good = sign(SECRET, NOW, BODY)
    header = f"t={NOW}, v0=zzz, v1={'0' * 64}, v1={good.upper()}"
    assert parse_header(header).signatures == ("0" * 64, good)
    assert verify(SECRET, header, BODY, now=NOW, tolerance_s=1) == good


# -- save-time checks --------------------------------------------------------------------


def refused(call: Any) -> list[str]:
    with pytest.raises(ValidationFailed) as caught:
        call()
    return [e.field for e in caught.value.errors]


def test_config_is_read_by_kind() -> None:
    assert check_config(TriggerKind.WEBHOOK, {}, "body.config").model_dump() == {
        "payload_schema": None
    }
    assert refused(lambda: check_config(TriggerKind.WEBHOOK, {"cron": "x"}, "body.config")) == [
        "body.config.cron"
    ]
    assert refused(lambda: check_config(TriggerKind.SCHEDULE, {}, "body.config")) == ["body.config"]
    assert refused(
        lambda: check_config(
            TriggerKind.SCHEDULE, {"cron": "61 * * * *", "timezone": "Mars/Base"}, "body.config"
        )
    ) == ["body.config.timezone", "body.config.cron"]
    assert refused(
        lambda: check_config(TriggerKind.SCHEDULE, {"interval_s": 5}, "body.config")
    ) == ["body.config.interval_s"]


def test_a_payload_schema_must_be_a_json_schema() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "one"}}}
    assert refused(
        lambda: check_config(TriggerKind.WEBHOOK, {"payload_schema": schema}, "body.config")
    ) == ["body.config.payload_schema.properties.n.minimum"]
    assert refused(
        lambda: check_config(
            TriggerKind.WEBHOOK, {"payload_schema": {"type": "thing"}}, "body.config"
        )
    ) == ["body.config.payload_schema.type"]


def test_a_target_is_read_by_its_own_kind() -> None:
    fields = refused(lambda: check_target(TriggerKind.WEBHOOK, {"agent_id": "a"}, "body.target"))
    assert fields == ["body.target.kind"]
    fields = refused(
        lambda: check_target(TriggerKind.WEBHOOK, {"kind": "run", "agent_id": "a"}, "body.target")
    )
    assert fields == ["body.target.input"]
    fields = refused(
        lambda: check_target(
            TriggerKind.WEBHOOK,
            {"kind": "workflow", "workflow_id": "w", "context": {"a": "{{ fire_time }}"}, "x": 1},
            "body.target",
        )
    )
    assert fields == ["body.target.x"]
    fields = refused(
        lambda: check_target(
            TriggerKind.SCHEDULE,
            {"kind": "workflow", "workflow_id": "w", "context": {"a": "{{ payload }}"}},
            "body.target",
        )
    )
    assert fields == ["body.target.context.a"]
    checked = check_target(
        TriggerKind.WEBHOOK,
        {"kind": "run", "agent_id": "a", "input": "{{ payload.x }}", "lane": "l:{{ payload.y }}"},
        "body.target",
    )
    assert set(checked.templates) == {"input", "lane", "metadata"}


def test_first_fire_times() -> None:
    now = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)  # Berlin moves to summer time on the 29th
    daily = ScheduleConfig(cron="30 2 * * *", timezone="Europe/Berlin")
    # 02:30 does not exist in Berlin on the 29th: cronsim fires at the first time after it.
    assert SCHEDULE.next_fire_at(daily, True, now) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    nine = ScheduleConfig(cron="0 9 * * *", timezone="Europe/Berlin")
    assert SCHEDULE.next_fire_at(nine, True, now) == datetime(2026, 3, 29, 7, 0, tzinfo=UTC)  # CEST
    assert SCHEDULE.next_fire_at(ScheduleConfig(interval_s=90), True, now) == datetime(
        2026, 3, 28, 12, 1, 30, tzinfo=UTC
    )


def test_a_trigger_reads_its_config_by_its_kind() -> None:
    common = {
        "id": "trg_1",
        "name": "t",
        "description": "",
        "enabled": True,
        "target": {"kind": "run", "agent_id": "a", "input": "x"},
        "next_fire_at": None,
        "last_fired_at": None,
        "version": 1,
        "created_at": datetime(2026, 1, 1, tzinfo=UTC),
        "updated_at": datetime(2026, 1, 1, tzinfo=UTC),
    }
    hook = TriggerRead.model_validate({**common, "kind": "webhook", "config": {}})
    timer = TriggerRead.model_validate(
        {**common, "kind": "schedule", "config": {"cron": "* * * * *"}}
    )
    assert WEBHOOK.config_of(hook).payload_schema is None
    assert SCHEDULE.config_of(timer).cron == "* * * * *"
    with pytest.raises(ValueError, match="is a webhook trigger"):
        SCHEDULE.config_of(hook)
    with pytest.raises(ValueError, match="is a schedule trigger"):
        WEBHOOK.config_of(timer)


@pytest.mark.parametrize(
    "config",
    [
        {"source": "run"},
        {"source": "run", "agent_id": "a", "workflow_id": "w"},
        {"source": "workflow"},
        {"source": "workflow", "workflow_id": "w", "agent_id": "a"},
    ],
)
def test_a_chain_names_its_source(config: dict[str, Any]) -> None:
    with pytest.raises(ValidationFailed):
        check_config(TriggerKind.CHAIN, config, "body.config")
