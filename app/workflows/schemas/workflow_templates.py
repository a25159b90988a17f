"""Workflow templates (`/v1/workflow-templates`): built-in definitions of each workflow
kind with typed variables, and the request that makes a definition of one."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from app.core.fields import Name
from app.core.vocabulary import VariableType, WorkflowKind
from app.workflows.schemas.workflows import WorkflowCreate

MAX_TEXT_VARIABLE = 200  # characters of a string variable's value, at most
MAX_VARIABLES = 50  # of one template, and in one request
_VARIABLE_NAME = r"^[a-z_][a-z0-9_]{0,63}$"
# Names the placeholder language (`app/workflows/engine/conditions.py`) reads as literals, not keys.
_LITERALS = frozenset({"true", "false", "null"})


def _int_or_text(value: Any) -> Any:
    # JSON's true and 1.0 are neither: no silent turn of a boolean into 1.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("must be an integer or a string")
    return value


VariableValue = Annotated[int | str, BeforeValidator(_int_or_text)]


class TemplateVariable(BaseModel):
    """A value a template's definition takes at instantiation (`{{ name }}` in it). An
    `int` lies between `minimum` and `maximum`; a `string`'s length does (from 1 and to
    200 when unset), its surrounding whitespace stripped."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=_VARIABLE_NAME, examples=["wip_limit"])
    type: VariableType
    default: int | str = Field(examples=[3])
    minimum: int | None = Field(None, examples=[1])
    maximum: int | None = Field(None, examples=[20])
    description: str = Field(examples=["Tasks the in_progress column holds at most."])

    @model_validator(mode="after")
    def _default_fits(self) -> TemplateVariable:
        if self.name in _LITERALS:
            raise ValueError(f"{self.name!r} is a literal of the placeholders, not a name")
        low, high = self.bounds
        if low > high:
            raise ValueError(f"minimum {low} is over maximum {high}")
        problem = self.problem(self.default)
        if problem is not None:
            raise ValueError(f"default {self.default!r} {problem}")
        return self

    @property
    def bounds(self) -> tuple[int, int]:
        """The least and the most the value (an int) or its length (a string) may be."""
        if self.type is VariableType.STRING:
            return (
                1 if self.minimum is None else self.minimum,
                MAX_TEXT_VARIABLE if self.maximum is None else self.maximum,
            )
        return (
            -(2**31) if self.minimum is None else self.minimum,
            2**31 - 1 if self.maximum is None else self.maximum,
        )

    def value(self, given: int | str) -> int | str:
        """The value as the template takes it (a string stripped)."""
        return given.strip() if isinstance(given, str) else given

    def problem(self, given: Any) -> str | None:
        """What is wrong with a value given for this variable, or None when it fits."""
        low, high = self.bounds
        if self.type is VariableType.INT:
            if isinstance(given, bool) or not isinstance(given, int):
                return "must be an integer"
            if not low <= given <= high:
                return f"must be from {low} to {high}"
            return None
        if not isinstance(given, str):
            return "must be a string"
        if not low <= len(given.strip()) <= high:
            return f"must be {low} to {high} characters long (surrounding spaces left out)"
        return None


class WorkflowTemplateSummary(BaseModel):
    """A built-in template: a definition of one workflow kind, with its variables."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(examples=["agile_kanban"])
    description: str
    kind: WorkflowKind
    variables: list[TemplateVariable]


class WorkflowTemplateRead(WorkflowTemplateSummary):
    definition: WorkflowCreate = Field(
        description="The definition the template makes with every variable at its default "
        "(`POST /v1/workflows` accepts it as it is)."
    )


class TemplateInstantiate(BaseModel):
    """A definition made from a template. `variables` not given take their defaults."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = Field(None, description="The definition's name (default: the template's).")
    project: Name | None = Field(
        None,
        description="The project the definition works in: its board gets the template's WIP "
        "limits (columns with no limit yet) and, for `agile_kanban`, a first sprint; "
        "activations that name no project use it.",
        examples=["atlas"],
    )
    variables: dict[str, VariableValue] = Field(
        default_factory=dict,
        max_length=MAX_VARIABLES,
        description="Values by variable name: an integer or a string, as the variable's "
        "`type` says.",
        examples=[{"sprint_length": 10, "wip_limit": 2}],
    )
