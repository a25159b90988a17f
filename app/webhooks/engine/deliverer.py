"""The deliverer: sends the deliveries the outbox trigger queues, retries them with backoff
and dead-letters them when their attempts run out. One per process (`serve`, `worker`).

Its loop claims what is due (up to its free slots of `concurrency`) in one short
transaction that counts each claimed delivery's attempt and moves its `next_attempt_at`
to the end of a lease, with SKIP LOCKED, so deliverers of several processes never take
the same delivery. Each attempt is then sent with no transaction open, and its outcome
recorded in a second transaction, fenced by the attempt's number: an attempt whose lease
ran out (the process stalled, another deliverer took the delivery over) records nothing.
A process killed mid-attempt leaves its deliveries pending; they are due again when their
lease ends. So a delivery is sent at least once, and possibly twice when an attempt
outlives its lease or its outcome is lost: receivers tell repeats by `Loopwright-Delivery`.

It sleeps until the next delivery is due (at most `poll_interval_s`), and wakes at once
when a transaction queues deliveries (the trigger's NOTIFY, through the bus) or a slot
frees up. Time comes from the injected clock; `run_once` / `run_until_idle` drain what is
due without the loop, for tests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.states import DeliveryStatus, check_delivery_transition
from app.core.streams import DELIVERIES_DUE, WEBHOOKS_STREAM
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.events.engine.published import Written, published
from app.runtime.components import Loop, Wakes
from app.telemetry.metrics import Metrics
from app.webhooks import store
from app.webhooks.engine.policy import DeliveryPolicy, retry_delay
from app.webhooks.engine.sender import Message, Outcome, Sender
from app.webhooks.schemas import WebhookDeliveryEventType
from app.webhooks.store import Claimed

log = logging.getLogger(__name__)

E = WebhookDeliveryEventType


class WebhookDeliverer:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        policy: DeliveryPolicy,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sender: Sender | None = None,
        metrics: Metrics | None = None,
        poll_interval_s: float = 10.0,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._bus = bus
        self._policy = policy
        self._clock = clock
        self._sender = sender or Sender(policy)
        self._metrics = metrics
        self._poll_interval_s = poll_interval_s
        self._in_flight: dict[asyncio.Task[None], Claimed] = {}
        self._next_s: float | None = None  # when the last pass wants the next one
        # A pass when deliveries fall due (the stream), when an attempt ends (a slot
        # freed: `wake()`), at the next due time, or every poll interval.
        self.loop = Loop(
            "webhook-deliverer",
            self._claim_free,
            Wakes(poll_interval_s, (DELIVERIES_DUE,), sooner=lambda: self._next_s),
            bus=bus,
            clock=clock,
        )

    def start(self) -> None:
        self.loop.start()

    async def stop(self, grace_s: float = 5.0) -> None:
        """Claim nothing more; attempts in flight get `grace_s` to finish, then are cut
        short and given back (due at once, their attempt not counted)."""
        await self.loop.stop()
        if self._in_flight:
            _, cut = await asyncio.wait(self._in_flight, timeout=grace_s)
            for task in cut:
                task.cancel()
            await asyncio.gather(*cut, return_exceptions=True)

    async def run_once(self) -> int:
        """Send what is due now (up to `concurrency`) and record the outcomes; how many."""
        claimed = await self._claim(self._policy.concurrency)
        await asyncio.gather(*(self._deliver(c) for c in claimed))
        return len(claimed)

    async def run_until_idle(self) -> int:
        """`run_once` until nothing is due; how many attempts were made."""
        total = 0
        while sent := await self.run_once():
            total += sent
        return total

    # -- the loop ------------------------------------------------------------------------

    async def _claim_free(self) -> None:
        """One pass: what is due claimed into the free slots, each sent in a task of its
        own. The next pass comes at once when every free slot was filled (there may be
        more), else at the next due time; when full, a finished attempt wakes it."""
        self._next_s = None
        free = self._policy.concurrency - len(self._in_flight)
        if free <= 0:
            return
        claimed = await self._claim_quietly(free)
        for delivery in claimed:
            self._spawn(delivery)
        self._next_s = 0.0 if len(claimed) == free else await self._until_due()

    def _spawn(self, claimed: Claimed) -> None:
        """Send it in a task of its own; its end frees a slot and wakes the loop."""
        task = asyncio.create_task(self._deliver(claimed), name=f"webhook-delivery-{claimed.id}")
        self._in_flight[task] = claimed

        def finished(done: asyncio.Task[None]) -> None:
            self._in_flight.pop(done, None)
            self.loop.wake()

        task.add_done_callback(finished)

    async def _claim_quietly(self, limit: int) -> list[Claimed]:
        try:
            return await self._claim(limit)
        except Exception:  # the database may be away for a while: try again on the next pass
            log.exception("webhook deliverer: claiming due deliveries failed")
            return []

    async def _until_due(self) -> float:
        """Seconds until the earliest pending delivery is due, at most the poll interval.
        One that is due but was not claimed (its webhook is disabled, or another process
        holds it right now) waits for a wake-up or the poll."""
        try:
            async with self._sessionmaker() as session:
                due = await store.next_due(session)
        except Exception:
            log.exception("webhook deliverer: reading the next due time failed")
            return self._poll_interval_s
        if due is None:
            return self._poll_interval_s
        wait = (due - self._clock()).total_seconds()
        return self._poll_interval_s if wait <= 0 else min(wait, self._poll_interval_s)

    # -- one attempt -----------------------------------------------------------------------

    async def _claim(self, limit: int) -> list[Claimed]:
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            return await store.claim_due(session, now, now + self._policy.lease, limit=limit)

    async def _deliver(self, claimed: Claimed) -> None:
        message = Message(
            claimed.id, claimed.event_type, claimed.url, claimed.secret, claimed.payload
        )
        started_at = self._clock()
        try:
            outcome = await self._sender.send(message, int(started_at.timestamp()))
        except asyncio.CancelledError:
            await asyncio.shield(self._give_back(claimed))
            raise
        try:
            await self._record(claimed, started_at, outcome)
        except Exception:  # its lease runs out and it is sent again: at least once
            log.exception("webhook delivery %s: recording attempt %d failed", *_named(claimed))

    async def _give_back(self, claimed: Claimed) -> None:
        """An attempt cut short by shutdown: due again at once, its number not used."""
        try:
            async with self._sessionmaker() as session, session.begin():
                await store.release(session, claimed, self._clock())
        except Exception:
            log.exception("webhook delivery %s: giving back attempt %d failed", *_named(claimed))

    async def _record(self, claimed: Claimed, started_at: datetime, outcome: Outcome) -> None:
        now = self._clock()
        values: dict[str, Any] = {
            "last_status_code": outcome.status_code,
            "last_latency_ms": outcome.latency_ms,
            "last_response": outcome.excerpt,
            "last_error": outcome.error,
        }
        delay = None if outcome.succeeded else retry_delay(self._policy, claimed.round_attempt)
        if outcome.succeeded:
            kind, status = E.SUCCEEDED, DeliveryStatus.SUCCEEDED
            values |= {"status": status.value, "delivered_at": now}
        elif delay is None:
            kind, status = E.DEAD_LETTERED, DeliveryStatus.DEAD_LETTER
            values |= {"status": status.value}
        else:
            kind, status = E.FAILED, DeliveryStatus.PENDING
            values |= {"next_attempt_at": now + delay}
        if status is not DeliveryStatus.PENDING:  # a retry stays pending: no transition
            check_delivery_transition(DeliveryStatus.PENDING, status)
        data = {
            "webhook_id": claimed.webhook_id,
            "delivery_id": claimed.id,
            "event_type": claimed.event_type,
            "attempt": claimed.attempt,
            "status_code": outcome.status_code,
            "latency_ms": outcome.latency_ms,
            "error": outcome.error,
            "next_attempt_at": (now + delay).isoformat() if delay is not None else None,
        }
        async with self._sessionmaker() as session, session.begin():
            if await store.settle_attempt(session, claimed, values) is None:
                log.warning(
                    "webhook delivery %s: attempt %d was taken over; its outcome is dropped",
                    *_named(claimed),
                )
                return
            await store.insert_attempt(
                session,
                {
                    "delivery_id": claimed.id,
                    "attempt": claimed.attempt,
                    "started_at": started_at,
                    "succeeded": outcome.succeeded,
                    "status_code": outcome.status_code,
                    "latency_ms": outcome.latency_ms,
                    "response_excerpt": outcome.excerpt,
                    "error": outcome.error,
                },
            )
            await event_store.append_events(
                session, WEBHOOKS_STREAM, [event_store.NewEvent(kind.value, data)], now
            )
        published(self._bus, [Written(WEBHOOKS_STREAM, [(kind.value, data)])])
        if self._metrics is not None:
            self._metrics.webhook_attempt(kind, outcome.latency_ms / 1000)


def _named(claimed: Claimed) -> tuple[str, int]:
    return claimed.id, claimed.attempt
