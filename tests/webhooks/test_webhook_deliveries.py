"""Outbound webhook deliveries on the real database and a real local receiver, with an
injected clock: the outbox the trigger writes, retries on the backoff schedule, dead
letters, redelivers, the lease between deliverers, the address policy at each attempt."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import InvalidTransition, NotFound, ValidationFailed, VersionConflict
from app.core.ids import new_id
from app.core.states import DeliveryStatus
from app.core.streams import (
    APPROVALS_STREAM,
    DELIVERIES_DUE,
    RUNS_STREAM,
    WEBHOOKS_STREAM,
    lane_stream,
)
from app.core.vocabulary import WebhookEventType
from app.db.connection import libpq_url
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.events.engine.pg_listener import PgListener
from app.telemetry.metrics import Metrics
from app.webhooks import store
from app.webhooks.engine import deliverer as deliverer_module
from app.webhooks.engine.commands import WebhookCommands
from app.webhooks.engine.deliverer import WebhookDeliverer
from app.webhooks.engine.policy import DeliveryPolicy
from app.webhooks.engine.sender import _send_first
from app.webhooks.schemas import WebhookCreate, WebhookDeliveryRead, WebhookPatch, WebhookWithSecret
from tests.support.engine import ManualClock
from tests.support.receiver import Answer, Receiver, receiver

LOCAL = DeliveryPolicy(allowed_networks=("127.0.0.0/8",), timeout_s=2.0, lease_s=30.0)
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def hooks() -> AsyncIterator[Receiver]:
    async with receiver() as found:
        yield found


@pytest.fixture
def wall() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def commands(
    sessionmaker: async_sessionmaker[AsyncSession], bus: EventBus, wall: ManualClock
) -> WebhookCommands:
    return WebhookCommands(sessionmaker, bus, LOCAL, clock=wall)


def deliverer(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    clock: ManualClock,
    policy: DeliveryPolicy = LOCAL,
    **options: Any,
) -> WebhookDeliverer:
    return WebhookDeliverer(sessionmaker, bus, policy, clock=clock, **options)


async def subscribe(
    commands: WebhookCommands, url: str, *types: str, enabled: bool = True
) -> WebhookWithSecret:
    body = WebhookCreate.model_validate(
        {"url": url, "event_types": list(types or ["approval.requested"]), "enabled": enabled}
    )
    webhook, _ = await commands.create_keyed(body)
    return webhook


async def emit(
    sessionmaker: async_sessionmaker[AsyncSession],
    at: datetime,
    *events: tuple[str, str, dict[str, Any]],
) -> None:
    """Events (stream, type, data) written in one transaction, as any writer does."""
    async with sessionmaker() as session, session.begin():
        await event_store.append_many(
            session,
            [(stream, event_store.NewEvent(kind, data), at) for stream, kind, data in events],
        )


def asked(approval_id: str = "apr_1") -> tuple[str, str, dict[str, Any]]:
    return (APPROVALS_STREAM, "approval.requested", {"approval_id": approval_id})


async def deliveries(
    sessionmaker: async_sessionmaker[AsyncSession], webhook_id: str
) -> list[WebhookDeliveryRead]:
    async with sessionmaker() as session:
        return await store.list_deliveries(
            session, webhook_id, before_id=None, limit=1000, status=None
        )


async def stream(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> list[tuple[str, dict[str, Any]]]:
    async with sessionmaker() as session:
        events = await event_store.read_events(session, WEBHOOKS_STREAM, after=0, limit=1000)
    return [(e.type, e.data) for e in events]


async def test_one_event_is_one_signed_post_with_the_event_as_its_body(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    wall: ManualClock,
    commands: WebhookCommands,
    hooks: Receiver,
) -> None:
    webhook = await subscribe(commands, hooks.hook())
    await emit(sessionmaker, wall.now, asked("apr_7"))

    assert await deliverer(sessionmaker, bus, wall).run_until_idle() == 1

    [got] = hooks.received
    [delivery] = await deliveries(sessionmaker, webhook.id)
    assert got.signed_by(webhook.secret)
    assert got.headers["loopwright-signature"].startswith(f"t={int(wall.now.timestamp())},v1=")
    assert got.headers["content-type"] == "application/json"
    assert got.headers["loopwright-event"] == "approval.requested"
    assert got.delivery_id == delivery.id and delivery.id.startswith("whd_")
    assert got.json == {
        "id": delivery.id,
        "type": "approval.requested",
        "stream": "approvals",
        "seq": 1,
        "created_at": "2026-03-01T12:00:00.000000Z",
        "data": {"approval_id": "apr_7"},
    }
    assert delivery.payload.model_dump(mode="json")["data"] == {"approval_id": "apr_7"}
    assert delivery.status is DeliveryStatus.SUCCEEDED and delivery.attempts == 1
    assert delivery.delivered_at == wall.now and delivery.next_attempt_at is None
    assert (delivery.last_status_code, delivery.last_response) == (200, "ok")


async def test_only_subscribed_types_of_enabled_webhooks_and_a_runs_lane_copy_are_delivered(
    sessionmaker: async_sessionmaker[AsyncSession],
    wall: ManualClock,
    commands: WebhookCommands,
    hooks: Receiver,
) -> None:
    runs = await subscribe(commands, hooks.hook("runs"), "agent_run.completed", "trigger.fired")
    approvals = await subscribe(commands, hooks.hook("approvals"), "approval.requested")
    off = await subscribe(commands, hooks.hook("off"), "agent_run.completed", enabled=False)
    board = {"run_id": "run_1", "status": "completed", "lane": "team"}
    details = {"run_id": "run_1", "status": "completed", "stop_reason": "end_turn"}
    await emit(
        sessionmaker,
        wall.now,
        (RUNS_STREAM, "agent_run.completed", board),  # the board's copy: not delivered
        (lane_stream("team"), "agent_run.completed", details),
        (lane_stream("team"), "agent_run.started", details),  # not subscribable
        (APPROVALS_STREAM, "approval.cancelled", {}),  # not subscribable
        ("triggers", "trigger.fired", {"trigger_id": "trg_1"}),
        (WEBHOOKS_STREAM, "webhook.delivery.succeeded", {}),  # never subscribable
    )

    [completed, fired] = sorted(await deliveries(sessionmaker, runs.id), key=lambda d: d.id)
    assert completed.payload.stream == "lane:team"
    assert completed.payload.data == {**details, "lane": "team"}
    assert fired.event_type is WebhookEventType.TRIGGER_FIRED
    assert await deliveries(sessionmaker, approvals.id) == []
    assert await deliveries(sessionmaker, off.id) == []


async def test_a_flaky_receiver_is_retried_on_the_backoff_schedule_dead_lettered_and_redelivered(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    wall: ManualClock,
    commands: WebhookCommands,
    hooks: Receiver,
) -> None:
    hooks.plan(*(Answer(500 + n, f"boom {n}") for n in range(5)))
    webhook = await subscribe(commands, hooks.hook())
    await emit(sessionmaker, wall.now, asked())
    metrics = Metrics()
    sending = deliverer(sessionmaker, bus, wall, metrics=metrics)
    start = wall.now

    # 15 s doubling: each retry is due exactly then, not a moment before.
    for attempt, delay_s in enumerate([15, 30, 60, 120], start=1):
        assert await sending.run_once() == 1
        [delivery] = await deliveries(sessionmaker, webhook.id)
        assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, attempt)
        assert delivery.next_attempt_at == wall.now + timedelta(seconds=delay_s)
        wall.advance(seconds=delay_s - 0.001)
        assert await sending.run_once() == 0
        wall.advance(seconds=0.001)
    assert await sending.run_once() == 1
    assert wall.now - start == timedelta(seconds=15 + 30 + 60 + 120)

    [dead] = await deliveries(sessionmaker, webhook.id)
    assert (dead.status, dead.attempts, dead.next_attempt_at) == (
        DeliveryStatus.DEAD_LETTER,
        5,
        None,
    )
    assert (dead.last_status_code, dead.last_response) == (504, "boom 4")
    wall.advance(seconds=3600)
    assert await sending.run_once() == 0  # a dead letter waits for a person

    redelivered = await commands.redeliver(webhook.id, dead.id)
    assert (redelivered.status, redelivered.next_attempt_at) == (DeliveryStatus.PENDING, wall.now)
    with pytest.raises(InvalidTransition):  # it is on its way already
        await commands.redeliver(webhook.id, dead.id)
    assert await sending.run_once() == 1

    [done] = await deliveries(sessionmaker, webhook.id)
    assert (done.status, done.attempts, done.last_status_code) == (DeliveryStatus.SUCCEEDED, 6, 200)
    assert [r.delivery_id for r in hooks.received] == [done.id] * 6
    assert all(r.signed_by(webhook.secret) for r in hooks.received)
    async with sessionmaker() as session:
        log = await store.attempts_of(session, done.id)
    assert [(a.attempt, a.succeeded, a.status_code, a.response_excerpt) for a in log] == [
        *((n + 1, False, 500 + n, f"boom {n}") for n in range(5)),
        (6, True, 200, "ok"),
    ]
    assert all(a.latency_ms >= 0 and a.error is None for a in log)
    assert log[1].started_at == start + timedelta(seconds=15)

    kinds = [kind for kind, _ in await stream(sessionmaker)]
    assert kinds == [
        *["webhook.delivery.failed"] * 4,
        "webhook.delivery.dead_lettered",
        "webhook.delivery.redelivered",
        "webhook.delivery.succeeded",
    ]
    counted = {
        s.labels["outcome"]: s.value
        for family in metrics.registry.collect()
        if family.name == "loopwright_webhook_deliveries"
        for s in family.samples
        if s.name.endswith("_total")
    }
    assert counted == {"succeeded": 1, "failed": 4, "dead_lettered": 1}


async def test_a_redelivery_gets_a_fresh_budget_of_attempts(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    wall: ManualClock,
    commands: WebhookCommands,
    hooks: Receiver,
) -> None:
    policy = DeliveryPolicy(
        max_attempts=2, backoff_base_s=1, allowed_networks=("127.0.0.0/8",), lease_s=30
    )
    hooks.plan(*(Answer(500) for _ in range(4)))
    webhook = await subscribe(commands, hooks.hook())
    await emit(sessionmaker, wall.now, asked())
    sending = deliverer(sessionmaker, bus, wall, policy)
    assert await sending.run_once() == 1
    wall.advance(seconds=1)
    assert await sending.run_once() == 1
    [dead] = await deliveries(sessionmaker, webhook.id)
    await commands.redeliver(webhook.id, dead.id)
    assert await sending.run_once() == 1
    [retrying] = await deliveries(sessionmaker, webhook.id)
    # The round's first attempt failed: one more, after the base delay, as at first.
    assert (retrying.status, retrying.attempts) == (DeliveryStatus.PENDING, 3)
    assert retrying.next_attempt_at == wall.now + timedelta(seconds=1)
    wall.advance(seconds=1)
    assert await sending.run_once() == 1
    [again] = await deliveries(sessionmaker, webhook.id)
    assert (again.status, again.attempts) == (DeliveryStatus.DEAD_LETTER, 4)


async def test_two_deliverers_share_the_work_and_never_send_one_delivery_twice(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    wall: ManualClock,
    commands: WebhookCommands,
    hooks: Receiver,
) -> None:
    webhook = await subscribe(commands, hooks.hook())
    await emit(sessionmaker, wall.now, *(asked(f"apr_{n}") for n in range(24)))
    policy = DeliveryPolicy(allowed_networks=("127.0.0.0/8",), concurrency=3, lease_s=30)
    first, second = (deliverer(sessionmaker, bus, wall, policy) for _ in range(2))

    sent = await asyncio.gather(first.run_until_idle(), second.run_until_idle())

    assert sum(sent) == 24
    assert set(Counter(r.delivery_id for r in hooks.received).values()) == {1}
    assert len(hooks.received) == 24
    settled = await deliveries(sessionmaker, webhook.id)
    assert {(d.status, d.attempts) for d in settled} == {(DeliveryStatus.SUCCEEDED, 1)}


async def test_an_attempt_held_past_its_lease_is_taken_over_and_its_late_outcome_dropped(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    wall: ManualClock,
    commands: WebhookCommands,
    hooks: Receiver,
) -> None:
    held = asyncio.Event()
    hooks.plan(Answer(500, "late", hold=held))
    webhook = await subscribe(commands, hooks.hook())
    await emit(sessionmaker, wall.now, asked())
    stalled, other = deliverer(sessionmaker, bus, wall), deliverer(sessionmaker, bus, wall)

    first = asyncio.create_task(stalled.run_once())
    await hooks.wait_for(1)
    assert await other.run_once() == 0  # held under the first one's lease
    wall.advance(seconds=LOCAL.lease_s)
    assert await other.run_once() == 1  # the lease ran out: taken over, answered 200
    held.set()
    assert await first == 1

    [delivery] = await deliveries(sessionmaker, webhook.id)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.SUCCEEDED, 2)
    async with sessionmaker() as session:
        log = await store.attempts_of(session, delivery.id)
    assert [(a.attempt, a.status_code) for a in log] == [(2, 200)]
    assert [kind for kind, _ in await stream(sessionmaker)] == ["webhook.delivery.succeeded"]


async def test_the_address_policy_is_checked_again_at_each_attempt(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    wall: ManualClock,
    commands: WebhookCommands,
    hooks: Receiver,
) -> None:
    webhook = await subscribe(commands, hooks.hook())  # saved while loopback was allowed
    await emit(sessionmaker, wall.now, asked())
    public_only = DeliveryPolicy(max_attempts=1)

    assert await deliverer(sessionmaker, bus, wall, public_only).run_once() == 1

    [delivery] = await deliveries(sessionmaker, webhook.id)
    assert delivery.status is DeliveryStatus.DEAD_LETTER
    assert delivery.last_error == "refusing to connect to 127.0.0.1: loopback address"
    assert delivery.last_status_code is None and hooks.received == []


@pytest.mark.parametrize(
    ("answer", "status", "error", "excerpt"),
    [
        (Answer(delay_s=1.0), None, "timed out after 0.3s", None),
        (Answer(302, "", headers={"location": "/elsewhere"}), 302, None, ""),
        (Answer(200, "é" * 50), 200, None, "é" * 8),
        (Answer(204, ""), 204, None, ""),
    ],
)
async def test_what_an_attempt_records_of_slow_moved_long_and_empty_answers(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    wall: ManualClock,
    commands: WebhookCommands,
    hooks: Receiver,
    answer: Answer,
    status: int | None,
    error: str | None,
    excerpt: str | None,
) -> None:
    policy = DeliveryPolicy(
        allowed_networks=("127.0.0.0/8",), timeout_s=0.3, excerpt_chars=8, max_attempts=1
    )
    hooks.plan(answer)
    webhook = await subscribe(commands, hooks.hook())
    await emit(sessionmaker, wall.now, asked())

    assert await deliverer(sessionmaker, bus, wall, policy).run_once() == 1

    [delivery] = await deliveries(sessionmaker, webhook.id)
    succeeded = status is not None and 200 <= status < 300
    expected = DeliveryStatus.SUCCEEDED if succeeded else DeliveryStatus.DEAD_LETTER
    assert delivery.status is expected
    assert (delivery.last_status_code, delivery.last_error) == (status, error)
    assert delivery.last_response == excerpt
    assert [r.path for r in hooks.received] == ["/hook"]  # the redirect was not followed


async def test_an_unreachable_receiver_is_a_failed_attempt(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    wall: ManualClock,
    commands: WebhookCommands,
) -> None:
    async with receiver() as gone:
        url = gone.hook()
    webhook = await subscribe(commands, url)
    await emit(sessionmaker, wall.now, asked())

    assert await deliverer(sessionmaker, bus, wall).run_once() == 1

    [delivery] = await deliveries(sessionmaker, webhook.id)
    assert delivery.status is DeliveryStatus.PENDING and delivery.attempts == 1
    assert delivery.last_error is not None and delivery.last_error.startswith("could not connect")


async def test_a_disabled_webhooks_pending_deliveries_wait_until_it_is_enabled(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    wall: ManualClock,
    commands: WebhookCommands,
    hooks: Receiver,
) -> None:
    webhook = await subscribe(commands, hooks.hook())
    await emit(sessionmaker, wall.now, asked())
    await commands.update(webhook.id, WebhookPatch(enabled=False), expected_version=1)
    sending = deliverer(sessionmaker, bus, wall)
    assert await sending.run_once() == 0
    await emit(sessionmaker, wall.now, asked("apr_2"))  # a disabled webhook gets nothing new
    assert len(await deliveries(sessionmaker, webhook.id)) == 1

    await commands.update(webhook.id, WebhookPatch(enabled=True), expected_version=2)
    assert await sending.run_once() == 1
    assert len(hooks.received) == 1


async def test_the_running_deliverer_is_woken_by_the_commit_and_gives_back_what_shutdown_cuts(
    sessionmaker: async_sessionmaker[AsyncSession],
    database_url: str,
    commands: WebhookCommands,
    hooks: Receiver,
) -> None:
    bus = EventBus()
    listener = PgListener(libpq_url(database_url), bus)
    listener.start()
    await asyncio.wait_for(listener.connected.wait(), 10)
    clock = ManualClock(datetime.now(UTC))
    held = asyncio.Event()
    hooks.plan(Answer(hold=held))
    webhook = await subscribe(commands, hooks.hook())
    running = deliverer(sessionmaker, bus, clock, poll_interval_s=3600)  # only a wake-up helps
    running.start()
    try:
        await emit(sessionmaker, clock.now, asked())
        await hooks.wait_for(1)  # woken by the trigger's NOTIFY, through the listener
        await running.stop(grace_s=0)
    finally:
        await running.stop()
        await listener.stop()

    [delivery] = await deliveries(sessionmaker, webhook.id)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, 0)
    assert delivery.next_attempt_at == clock.now  # given back: due again at once
    async with sessionmaker() as session:
        assert await store.attempts_of(session, delivery.id) == []


async def test_the_running_deliverer_fills_its_slots_and_sends_the_rest_as_they_free_up(
    sessionmaker: async_sessionmaker[AsyncSession],
    commands: WebhookCommands,
    hooks: Receiver,
) -> None:
    bus = EventBus()
    clock = ManualClock(datetime.now(UTC))
    webhook = await subscribe(commands, hooks.hook())
    await emit(sessionmaker, clock.now, *(asked(f"apr_{n}") for n in range(7)))
    policy = DeliveryPolicy(allowed_networks=("127.0.0.0/8",), concurrency=2, lease_s=30)
    running = deliverer(sessionmaker, bus, clock, policy, poll_interval_s=3600)
    running.start()
    try:
        await hooks.wait_for(7)
        for _ in range(100):  # the last outcomes are recorded after the receiver answered
            if {d.status for d in await deliveries(sessionmaker, webhook.id)} == {
                DeliveryStatus.SUCCEEDED
            }:
                break
            await asyncio.sleep(0.05)
    finally:
        await running.stop()
    assert {d.status for d in await deliveries(sessionmaker, webhook.id)} == {
        DeliveryStatus.SUCCEEDED
    }


async def test_delivery_ids_made_by_the_database_read_like_the_services_ids(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    async with sessionmaker() as session:
        made = list(
            await session.scalars(text("SELECT webhook_delivery_id() FROM generate_series(1, 50)"))
        )
    assert all(len(i) == 30 and i.startswith("whd_") for i in made)
    assert len(set(made)) == 50
    alphabet = set("0123456789abcdefghjkmnpqrstvwxyz")
    assert all(set(i[4:]) <= alphabet for i in made)
    assert new_id("whd")[:12] >= made[0][:12]  # the same clock, the same time digits first


async def test_the_commands_refuse_what_is_not_there_or_changed_since(
    sessionmaker: async_sessionmaker[AsyncSession],
    wall: ManualClock,
    commands: WebhookCommands,
    hooks: Receiver,
) -> None:
    webhook = await subscribe(commands, hooks.hook())
    for change in (
        commands.update("wh_nope", WebhookPatch(enabled=False), expected_version=None),
        commands.delete("wh_nope", expected_version=None),
        commands.rotate_secret("wh_nope", expected_version=None),
        commands.redeliver("wh_nope", "whd_nope"),
        commands.redeliver(webhook.id, "whd_nope"),
    ):
        with pytest.raises(NotFound):
            await change
    with pytest.raises(VersionConflict):
        await commands.delete(webhook.id, expected_version=2)
    rotated = await commands.rotate_secret(webhook.id, expected_version=1)
    assert rotated.secret != webhook.secret and rotated.version == 2
    await emit(sessionmaker, wall.now, asked())
    await commands.delete(webhook.id, expected_version=None)
    assert await deliveries(sessionmaker, webhook.id) == []  # the log went with it


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://\u2603.com/hook", "invalid URL: Invalid IDNA hostname"),
        ("http://localhost:9/hook", None),  # a name, resolved to 127.0.0.1: allowed here
        ("http://no-such-host.invalid/hook", None),  # may resolve later: each attempt checks
    ],
)
async def test_a_subscribed_url_is_read_and_resolved_as_the_deliverer_will(
    commands: WebhookCommands, url: str, message: str | None
) -> None:
    if message is None:
        await subscribe(commands, url)
        return
    with pytest.raises(ValidationFailed) as refused:
        await subscribe(commands, url)
    assert refused.value.errors[0].field == "body.url"
    assert refused.value.errors[0].message.startswith(message)


async def test_a_named_host_is_resolved_and_checked_at_each_attempt(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    wall: ManualClock,
    commands: WebhookCommands,
    hooks: Receiver,
) -> None:
    port = hooks.url.rsplit(":", 1)[1]
    named = await subscribe(commands, f"http://localhost:{port}/named")
    nowhere = await subscribe(commands, "http://no-such-host.invalid/hook")
    async with sessionmaker() as session, session.begin():  # as an older check let it in
        broken = await store.insert_webhook(
            session,
            {
                "id": "wh_broken",
                "url": "http://\u2603.com/",
                "description": "",
                "event_types": ["approval.requested"],
                "secret": "s",
                "enabled": True,
                "version": 1,
            },
        )
    await emit(sessionmaker, wall.now, asked())
    one_try = DeliveryPolicy(max_attempts=1, allowed_networks=("127.0.0.0/8",))
    assert await deliverer(sessionmaker, bus, wall, one_try).run_until_idle() == 3

    [delivered] = await deliveries(sessionmaker, named.id)
    assert delivered.status is DeliveryStatus.SUCCEEDED
    assert hooks.received[0].headers["host"] == f"localhost:{port}"
    [unresolved] = await deliveries(sessionmaker, nowhere.id)
    assert unresolved.last_error == "could not resolve no-such-host.invalid"
    [unreadable] = await deliveries(sessionmaker, broken.id)
    assert (unreadable.last_error or "").startswith("invalid URL: Invalid IDNA hostname")

    await emit(sessionmaker, wall.now, asked("apr_2"))
    public_only = DeliveryPolicy(max_attempts=1)
    assert await deliverer(sessionmaker, bus, wall, public_only).run_until_idle() == 3
    refused = [d for d in await deliveries(sessionmaker, named.id) if d.last_status_code is None]
    assert [d.last_error for d in refused] == ["refusing to connect to 127.0.0.1: loopback address"]


async def test_a_receiver_that_hangs_up_without_an_answer_is_a_failed_attempt(
    sessionmaker: async_sessionmaker[AsyncSession],
    bus: EventBus,
    wall: ManualClock,
    commands: WebhookCommands,
) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        webhook = await subscribe(commands, f"http://127.0.0.1:{port}/hook")
        await emit(sessionmaker, wall.now, asked())
        assert await deliverer(sessionmaker, bus, wall).run_once() == 1
    [delivery] = await deliveries(sessionmaker, webhook.id)
    assert delivery.status is DeliveryStatus.PENDING
    assert (delivery.last_error or "").startswith("the request failed (RemoteProtocolError")


async def test_the_first_address_that_accepts_a_connection_answers(hooks: Receiver) -> None:
    async with receiver() as gone:
        closed = gone.hook()
    async with httpx.AsyncClient() as client:
        requests = [client.build_request("POST", url) for url in (closed, hooks.hook())]
        response = await _send_first(client, requests)
        await response.aclose()
    assert response.status_code == 200 and len(hooks.received) == 1


class Heard(logging.Handler):
    """Sets `event` once a record saying `text` is logged."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


class FlakySessions:
    """The real sessionmaker until `broken`: then the database cannot be reached."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        self.broken = False

    def __call__(self) -> AsyncSession:
        if self.broken:
            raise ConnectionRefusedError("the database is away")
        return self._sessions()


async def test_a_database_that_goes_away_costs_a_late_delivery_never_a_lost_one(
    sessionmaker: async_sessionmaker[AsyncSession],
    wall: ManualClock,
    commands: WebhookCommands,
    hooks: Receiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()
    sessions = FlakySessions(sessionmaker)
    held = asyncio.Event()
    hooks.plan(Answer(hold=held), Answer(hold=held))
    webhook = await subscribe(commands, hooks.hook())
    await emit(sessionmaker, wall.now, asked())
    flaky = deliverer(sessions, bus, wall, poll_interval_s=0.01)  # type: ignore[arg-type]

    # The outcome of an attempt cannot be recorded: the lease runs out, it is sent again.
    sending = asyncio.create_task(flaky.run_once())
    await hooks.wait_for(1)
    sessions.broken = True
    held.set()
    assert await sending == 1
    assert "recording attempt 1 failed" in caplog.text
    [delivery] = await deliveries(sessionmaker, webhook.id)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, 1)

    # Nor can the loop claim, or read when to look again: it keeps trying.
    caplog.clear()
    heard = Heard("reading the next due time failed")
    logging.getLogger(deliverer_module.__name__).addHandler(heard)
    flaky.start()
    try:
        await asyncio.wait_for(heard.event.wait(), 10)
        assert "claiming due deliveries failed" in caplog.text
        # Back: the attempt is sent again once its lease has run out, and cut by a stop
        # while the database is away again, which leaves it to the lease once more.
        held.clear()
        wall.advance(seconds=LOCAL.lease_s)
        sessions.broken = False
        bus.publish(DELIVERIES_DUE)
        await hooks.wait_for(2)
        sessions.broken = True
        await flaky.stop(grace_s=0)
    finally:
        await flaky.stop()
        logging.getLogger(deliverer_module.__name__).removeHandler(heard)
    assert "giving back attempt 2 failed" in caplog.text
    [delivery] = await deliveries(sessionmaker, webhook.id)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, 2)
