"""The webhook kind: fired by a signed `POST /v1/hooks/{trigger_id}` (`engine/hooks.py`
and its route are its source); a fire's context holds the delivery's `payload` and
`headers`. The trigger has a signing secret, and its config may hold a JSON Schema the
payload must match."""

from __future__ import annotations

from typing import Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import Draft202012Validator, validator_for

from app.core.errors import ValidationFailed
from app.core.vocabulary import TriggerKind
from app.triggers.engine.kinds.base import COMMON_ROOTS, Kind
from app.triggers.schemas import WebhookConfig, WebhookTriggerCreate, WebhookTriggerRead


class WebhookKind(Kind[WebhookConfig]):
    name = TriggerKind.WEBHOOK.value
    config = WebhookConfig
    create_shape = WebhookTriggerCreate
    read_shape = WebhookTriggerRead
    roots = COMMON_ROOTS | {"payload", "headers"}
    has_secret = True

    def check(self, config: WebhookConfig, field: str) -> None:
        if config.payload_schema is not None:
            _check_payload_schema(config.payload_schema, f"{field}.payload_schema")


def _check_payload_schema(schema: dict[str, Any], field: str) -> None:
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        raise ValidationFailed.field(
            f"{field}{where}", f"is not a valid JSON Schema: {exc.message[:300]}"
        ) from None


WEBHOOK = WebhookKind()
