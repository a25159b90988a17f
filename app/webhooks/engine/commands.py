"""Webhook commands: subscribe (with `Idempotency-Key`), change (compare-and-set on
version), delete, rotate the secret, and redeliver a settled delivery.

A URL is checked against the address policy when it is saved: a host that resolves to an
address the policy refuses is a 422 naming `body.url`. A name that does not resolve now is
accepted (it may later); every attempt resolves and checks again anyway.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import NotFound, ValidationFailed, VersionConflict
from app.core.ids import new_id
from app.core.states import DeliveryStatus, check_delivery_transition
from app.core.streams import DELIVERIES_DUE, WEBHOOKS_STREAM
from app.db import idempotency
from app.db.idempotent_create import CreateKey, keyed_create
from app.events import store as event_store
from app.events.engine.bus import EventBus
from app.events.engine.published import Written, published
from app.webhooks import store
from app.webhooks.engine.policy import DeliveryPolicy
from app.webhooks.engine.targets import AddressRefused, InvalidUrl, Unresolvable, addresses, parse
from app.webhooks.schemas import (
    WebhookCreate,
    WebhookDeliveryEventType,
    WebhookDeliveryRead,
    WebhookPatch,
    WebhookRead,
    WebhookWithSecret,
)

CREATE_SCOPE = "webhooks.create"
SECRET_PREFIX = "whsec_"
RESOLVE_TIMEOUT_S = 5.0


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def public(webhook: WebhookWithSecret) -> WebhookRead:
    """The webhook as reads show it: without its secret."""
    return WebhookRead.model_validate(webhook.model_dump(exclude={"secret"}))


class WebhookCommands:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        policy: DeliveryPolicy,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        idempotency_retention: timedelta = idempotency.DEFAULT_RETENTION,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._bus = bus
        self._policy = policy
        self._clock = clock
        self._idempotency_retention = idempotency_retention

    async def check_url(self, url: str) -> None:
        """Refuse (422 naming `body.url`) a URL whose host resolves to a refused address."""
        try:
            await addresses(parse(url), self._policy, timeout_s=RESOLVE_TIMEOUT_S)
        except AddressRefused as exc:
            raise ValidationFailed.field(
                "body.url",
                f"{exc} (webhook URLs must reach public addresses unless the operator allows "
                "them: LOOPWRIGHT_WEBHOOKS__ALLOWED_NETWORKS)",
            ) from None
        except InvalidUrl as exc:
            raise ValidationFailed.field("body.url", str(exc)) from None
        except Unresolvable:
            pass  # it may resolve later; each attempt checks again

    async def create_keyed(
        self,
        body: WebhookCreate,
        *,
        idempotency_key: str | None = None,
        request_hash: str | None = None,
    ) -> tuple[WebhookWithSecret, bool]:
        """The webhook with its secret, and whether it is the first response to this key,
        replayed (the webhook as that create returned it)."""
        await self.check_url(body.url)
        key = CreateKey.of(CREATE_SCOPE, idempotency_key, request_hash)
        now = self._clock()
        values = body.model_dump(mode="json") | {
            "id": new_id("wh"),
            "secret": new_secret(),
            "version": 1,
            "created_at": now,
            "updated_at": now,
        }
        async with self._sessionmaker() as session, session.begin():
            create = await keyed_create(
                session, key, now=now, retention=self._idempotency_retention
            )
            if create.replay is not None:
                return WebhookWithSecret.model_validate(create.replay.response), True
            webhook = await store.insert_webhook(session, values)
            await create.remember(webhook.id, webhook.model_dump(mode="json"))
        return webhook, False

    async def update(
        self, webhook_id: str, body: WebhookPatch, *, expected_version: int | None
    ) -> WebhookRead:
        changes = body.model_dump(mode="json", exclude_unset=True)
        if "url" in changes:
            await self.check_url(changes["url"])
        updated = await self._change(webhook_id, expected_version, changes)
        return public(updated)

    async def rotate_secret(
        self, webhook_id: str, *, expected_version: int | None
    ) -> WebhookWithSecret:
        """A new secret signs every attempt from now on, retries of earlier deliveries too."""
        return await self._change(webhook_id, expected_version, {"secret": new_secret()})

    async def _change(
        self, webhook_id: str, expected_version: int | None, changes: dict[str, Any]
    ) -> WebhookWithSecret:
        async with self._sessionmaker() as session, session.begin():
            current = await self._current(session, webhook_id, expected_version)
            updated = await store.update_webhook(
                session,
                webhook_id,
                read_version=current.version,
                values=changes | {"updated_at": self._clock()},
            )
            assert updated is not None  # locked above: the compare-and-set cannot miss
            if changes.get("enabled"):
                await store.notify_due(session)  # its held deliveries may go now
        if changes.get("enabled"):
            self._bus.publish(DELIVERIES_DUE)
        return updated

    async def delete(self, webhook_id: str, *, expected_version: int | None) -> None:
        """The webhook goes with its delivery log; an attempt in flight finishes unrecorded."""
        async with self._sessionmaker() as session, session.begin():
            current = await self._current(session, webhook_id, expected_version)
            await store.delete_webhook(session, webhook_id, read_version=current.version)

    async def _current(
        self, session: AsyncSession, webhook_id: str, expected_version: int | None
    ) -> WebhookWithSecret:
        current = await store.get_webhook(session, webhook_id, lock=True)
        if current is None:
            raise NotFound("webhook", webhook_id)
        if expected_version is not None and expected_version != current.version:
            raise VersionConflict(expected_version, current.version)
        return current

    async def redeliver(self, webhook_id: str, delivery_id: str) -> WebhookDeliveryRead:
        """A settled delivery (succeeded or dead-lettered) goes out again now, with a fresh
        budget of attempts; its id stays, so a receiver can tell it from a new event. A
        pending one is refused (409 `invalid_transition`): it is on its way."""
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            if await store.get_webhook(session, webhook_id) is None:
                raise NotFound("webhook", webhook_id)
            current = await store.get_delivery(session, webhook_id, delivery_id, lock=True)
            if current is None:
                raise NotFound("webhook delivery", delivery_id)
            check_delivery_transition(current.status, DeliveryStatus.PENDING)
            delivery = await store.redeliver(session, delivery_id, now)
            event = (
                WebhookDeliveryEventType.REDELIVERED.value,
                {
                    "webhook_id": webhook_id,
                    "delivery_id": delivery_id,
                    "event_type": delivery.event_type.value,
                    "attempt": delivery.attempts,
                    "next_attempt_at": now.isoformat(),
                },
            )
            await event_store.append_events(
                session, WEBHOOKS_STREAM, [event_store.NewEvent(*event)], now
            )
        published(self._bus, [Written(WEBHOOKS_STREAM, [event]), Written(DELIVERIES_DUE)])
        return delivery
