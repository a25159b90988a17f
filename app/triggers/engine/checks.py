"""What a trigger must satisfy when it is saved, beyond its schema: its config read by its
kind (and checked by it: a webhook's payload schema is a JSON Schema; a schedule's cron
expression and time zone are real), its target read by the target's kind, and the
target's templates (their placeholders parse and read only roots the trigger's kind
provides). Each fault is a 422 naming its field (`body.config.cron`, `body.target.input`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from app.core.errors import FieldError, ValidationFailed
from app.triggers.engine.kinds import KINDS
from app.triggers.engine.templates import CEREMONY_ROOTS, Template, compile_templates
from app.triggers.schemas import RunTarget, Target, WorkflowTarget

_TARGET: TypeAdapter[RunTarget | WorkflowTarget] = TypeAdapter(Target)
# The fields of each target that are templates.
TEMPLATE_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {
    RunTarget: ("input", "lane", "metadata"),
    WorkflowTarget: ("context",),
}


@dataclass(frozen=True)
class CheckedTarget:
    """A target and its templates, by field name."""

    target: RunTarget | WorkflowTarget
    templates: dict[str, Template]


def path_of(prefix: str, loc: Sequence[int | str]) -> str:
    """`prefix` and a pydantic error location: `body.target.metadata.tags[0]`."""
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def refused(exc: ValidationError, prefix: str, *, tagged: bool = False) -> ValidationFailed:
    """A pydantic error as a 422 naming its fields under `prefix`; `tagged`: the location
    starts with a union's tag, which is no field of the body."""
    errors = []
    for error in exc.errors(include_url=False):
        loc = list(error["loc"])
        if tagged and loc and error["type"] not in ("union_tag_invalid", "union_tag_not_found"):
            loc = loc[1:]
        if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
            loc = ["kind"]
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "is not a field of this resource"
        errors.append(FieldError(path_of(prefix, loc), message))
    return ValidationFailed(errors)


def check_target(kind: str, target: dict[str, Any], field: str) -> CheckedTarget:
    try:
        parsed = _TARGET.validate_python(target)
    except ValidationError as exc:
        raise refused(exc, field, tagged=True) from None
    values = {
        f"{field}.{name}": getattr(parsed, name)
        for name in TEMPLATE_FIELDS[type(parsed)]
        if getattr(parsed, name) is not None
    }
    roots = KINDS.of(kind).roots
    if isinstance(parsed, RunTarget) and parsed.sprint is not None:
        roots = roots | CEREMONY_ROOTS
    compiled = compile_templates(values, roots)
    prefix = len(field) + 1
    return CheckedTarget(parsed, {name[prefix:]: t for name, t in compiled.items()})


def check_config(kind: str, config: dict[str, Any], field: str) -> BaseModel:
    """`config` read and checked by the trigger's kind."""
    trigger_kind = KINDS.of(kind)
    try:
        parsed: BaseModel = trigger_kind.config.model_validate(config)
    except ValidationError as exc:
        raise refused(exc, field) from None
    trigger_kind.check(parsed, field)
    return parsed
