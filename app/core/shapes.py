"""Shapes shared by every resource: field types, pages, problem documents, probes."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from app.core.errors import FieldError, ProblemCode

T = TypeVar("T")


class Order(StrEnum):
    """The order of a list: by creation time, oldest or newest first."""

    OLDEST = "oldest"
    NEWEST = "newest"


class Page(BaseModel, Generic[T]):
    """One page of a list; pass `next_cursor` as `cursor` for the next one (null: no more)."""

    items: list[T]
    next_cursor: str | None


class Problem(BaseModel):
    """An RFC 9457 problem document. `code` is stable; match on it, not on `title`."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=["urn:loopwright:problem:not_found"])
    title: str
    status: int
    detail: str
    code: ProblemCode
    instance: str | None = None


class ValidationProblem(Problem):
    """A 422 problem document (`validation_error`, `workflow_invalid`): `errors` names each
    field at fault and what is wrong with it."""

    errors: list[FieldError]


class Health(BaseModel):
    status: str


def _without_null(prop: dict[str, Any]) -> dict[str, Any]:
    """`anyOf: [X, null]` as X alone (keeping the title and description), with no default."""
    variants = prop.get("anyOf")
    if not isinstance(variants, list):
        return prop
    kept = [v for v in variants if v != {"type": "null"}]
    rest = {k: v for k, v in prop.items() if k not in {"anyOf", "default"}}
    if len(kept) == 1:
        return {**kept[0], **rest}
    return {**rest, "anyOf": kept}


def _declare_patch_rules(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """Only the nullable fields take `null`; at least one field to change is named (a
    guard such as a workflow's `version` is no change)."""
    nullable: frozenset[str] = getattr(model, "nullable_fields", frozenset())
    guards: frozenset[str] = getattr(model, "guard_fields", frozenset())
    properties = schema.get("properties", {})
    for name, prop in list(properties.items()):
        if name not in nullable:
            properties[name] = _without_null(prop)
    schema["anyOf"] = [{"required": [name]} for name in properties if name not in guards]


class PatchBody(BaseModel):
    """The body of every PATCH, one rule for all of them: a field left out stays as it is; a
    field sent as `null` is cleared when it may be empty (it is listed in `nullable_fields`),
    and refused with a 422 naming it otherwise (there is nothing to clear it to); a body
    that names no field to change is a 422. The published schema says both: only the
    nullable fields accept `null` there, and one field at least is required.

    The fields are declared optional only so that an absent one has a value in Python; read
    a patch with `model_dump(exclude_unset=True)`."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_declare_patch_rules)

    nullable_fields: ClassVar[frozenset[str]] = frozenset()
    # Fields that guard the change rather than make one (a version to match).
    guard_fields: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _refuse_null_for_required_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, value in data.items():
                if value is None and name in cls.model_fields and name not in cls.nullable_fields:
                    raise PydanticCustomError(
                        "not_nullable",
                        "{field} cannot be null (leave it out to keep its value)",
                        {"field": name},
                    )
        return data
