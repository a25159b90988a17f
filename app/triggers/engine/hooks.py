"""Inbound webhooks: a delivery to `POST /v1/hooks/{trigger_id}` is authenticated by its
trigger's secret (no API key), checked against the trigger's payload schema, and fires the
trigger through the one fire path.

Who wins when deliveries meet (all decided in the fire's transaction, under the lock of
its occasion, `delivery:<id>` or else `signature:<hex>`):

| what comes | answer |
| --- | --- |
| a delivery id that fired already | its first answer again (`replayed`); nothing starts |
| 20 identical deliveries at once | the first to lock the occasion fires; the rest replay it |
| a signature accepted before, under no or another delivery id | 409 `signature_reused` |
| a timestamp further than the tolerance from the clock | 401 `signature_expired` |

(A sender's retry keeps its delivery id, signed again or not, so it gets the first answer.)

An accepted signature is remembered (`hook_signatures`) for twice the tolerance, which
covers every time at which its timestamp could still pass; older ones are deleted as the
trigger's next signature is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jsonschema.validators import Draft202012Validator, validator_for
from referencing.exceptions import Unresolvable
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.config import TriggerSettings
from app.core.errors import FieldError, NotFound, ValidationFailed
from app.core.signatures import SignatureReused, verify
from app.triggers.engine.fires import FireResult
from app.triggers.engine.firing import TriggerFiring
from app.triggers.engine.kinds.webhook import WEBHOOK
from app.triggers.schemas import FireRead, HookAccepted, TriggerRead
from app.triggers.store import triggers as store

ACCEPTED = 202
MAX_SCHEMA_ERRORS = 20
# Request headers never put in a template's `headers`: credentials, and the signature.
PRIVATE_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "loopwright-signature"}
)


@dataclass(frozen=True)
class Authenticated:
    """A delivery whose signature matched its trigger's secret."""

    trigger: TriggerRead
    signature: str
    received_at: datetime


@dataclass(frozen=True)
class HookAnswer:
    """The answer to a delivery: its HTTP status and body; `replayed` when it is the first
    answer to its delivery id, given again."""

    status_code: int
    body: HookAccepted
    replayed: bool


def accepted(fire: FireRead) -> HookAccepted:
    return HookAccepted(
        fire_id=fire.id,
        status=fire.status,
        run_id=fire.run_id,
        execution_id=fire.execution_id,
        error=fire.error,
    )


def template_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """A delivery's headers as templates read them: lower case, `-` as `_`
    (`headers.x_github_event`), without credentials."""
    return {
        name.lower().replace("-", "_"): value
        for name, value in headers.items()
        if name.lower() not in PRIVATE_HEADERS
    }


class TriggerHooks:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        firing: TriggerFiring,
        settings: TriggerSettings,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._sessionmaker = sessionmaker
        self._firing = firing
        self._settings = settings
        self._clock = clock

    async def authenticate(
        self, trigger_id: str, body: bytes, signature_header: str | None
    ) -> Authenticated:
        """The delivery's trigger, if its signature is good: NotFound for an unknown trigger
        or one that is not a webhook; SignatureMissing, SignatureInvalid, SignatureExpired.
        A disabled trigger is refused later, once the caller is known to hold the secret."""
        async with self._sessionmaker() as session:
            trigger = await store.get_trigger(session, trigger_id, with_secret=True)
        if trigger is None or trigger.kind != WEBHOOK.name or trigger.secret is None:
            raise NotFound("webhook trigger", trigger_id)
        now = self._clock()
        signature = verify(
            trigger.secret,
            signature_header,
            body,
            now=now.timestamp(),
            tolerance_s=self._settings.signature_tolerance_s,
        )
        return Authenticated(trigger, signature, now)

    async def deliver(
        self,
        delivery: Authenticated,
        payload: dict[str, Any],
        *,
        headers: Mapping[str, str],
        delivery_id: str | None,
    ) -> HookAnswer:
        """Check the payload (ValidationFailed naming `body.<path>`), then fire once per
        delivery id (or signature)."""
        trigger = delivery.trigger
        check_payload(WEBHOOK.config_of(trigger).payload_schema, payload)
        occasion = f"delivery:{delivery_id}" if delivery_id else f"signature:{delivery.signature}"
        now = delivery.received_at
        async with self._sessionmaker() as session, session.begin():
            found = await self._firing.claim(session, trigger.id, occasion)
            if found is not None:
                if delivery_id is None:  # the same signed request, again
                    raise SignatureReused()
                return _replay(FireResult(found.fire, replayed=True, response=found.response))
            locked = await self._firing.enabled_trigger(session, trigger.id)
            forget_before = now - self._settings.signature_memory
            fresh = await store.accept_signature(
                session, trigger.id, delivery.signature, now=now, forget_before=forget_before
            )
            if not fresh:
                raise SignatureReused()
            context = {"payload": payload, "headers": template_headers(headers)}
            fired = await self._firing.fire_in(
                session,
                locked,
                context,
                fire_key=occasion,
                fired_at=now,
                response=_stored_answer,
            )
        result = await self._firing.published(fired)
        return HookAnswer(ACCEPTED, accepted(result.fire), replayed=False)


def _stored_answer(fire: FireRead) -> dict[str, Any]:
    return {"status_code": ACCEPTED, "body": accepted(fire).model_dump(mode="json")}


def _replay(result: FireResult) -> HookAnswer:
    stored = result.response or _stored_answer(result.fire)
    body = HookAccepted.model_validate(stored["body"])
    return HookAnswer(int(stored["status_code"]), body, replayed=True)


def check_payload(schema: dict[str, Any] | None, payload: Any) -> None:
    """ValidationFailed naming each place (`body.issue.title`) where `payload` breaks
    `schema`; nothing without a schema."""
    if schema is None:
        return
    validator = validator_for(schema, default=Draft202012Validator)(schema)
    try:
        found = sorted(validator.iter_errors(payload), key=lambda e: list(map(str, e.path)))
    except Unresolvable as exc:
        raise ValidationFailed.field(
            "body", f"the trigger's payload_schema refers to what cannot be resolved: {exc}"
        ) from None
    errors = [FieldError(_where(error), error.message[:300]) for error in found[:MAX_SCHEMA_ERRORS]]
    if errors:
        raise ValidationFailed(errors)


def _where(error: Any) -> str:
    """`body` and the path to the value at fault; for a missing required property, its
    name."""
    path = list(error.absolute_path)
    if error.validator == "required":  # one error per missing property, named in its message
        missing = [p for p in error.validator_value if p not in error.instance]
        path += [p for p in missing if repr(p) in error.message][:1]
    return "body" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
