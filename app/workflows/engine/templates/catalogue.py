"""The built-in workflow templates (`builtin/*.yaml`), checked as they load, and their
rendering into a definition.

A template file holds `name`, `description`, `kind`, `variables` (each typed, with a
default and bounds), a `definition` (a `WorkflowCreate` without `kind`, `board` and
`project`) and, for the board kinds, `board` (a `BoardDefaults`). Strings in `definition`
and `board` may hold `{{ variable }}` placeholders, rendered by the triggers' template
renderer (`app/triggers/engine/templates.py`, nothing evaluated): a string that is one
placeholder alone becomes the variable's typed value (`"{{ wip_limit }}"` is the number),
one with text around it is text. Rendering maps `board` into the definition's root, beside
the template's `kind`.

Loading refuses a template whose placeholders name no variable, whose defaults break their
own bounds, or whose definition with the defaults is not a valid one (`validate_workflow`).
The built-ins load on first use (PyYAML stays out of the server's start); the unit tests
load each, and render each at every bound of its variables.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from app.core.errors import FieldError, NotFound, ValidationFailed
from app.core.vocabulary import WorkflowKind
from app.triggers.engine.templates import Template, compile_templates, render
from app.workflows.engine.workflow_graph import validate_workflow
from app.workflows.schemas.workflow_templates import (
    MAX_VARIABLES,
    TemplateInstantiate,
    TemplateVariable,
    WorkflowTemplateRead,
    WorkflowTemplateSummary,
)
from app.workflows.schemas.workflows import WorkflowCreate

BUILTIN_DIR = Path(__file__).with_name("builtin")
# Set by the template, never by its definition's skeleton.
_TEMPLATE_FIELDS = frozenset({"kind", "board", "project"})


class TemplateSource(BaseModel):
    """A template file as written."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    description: str
    kind: WorkflowKind
    variables: list[TemplateVariable] = Field(default_factory=list, max_length=MAX_VARIABLES)
    definition: dict[str, Any]
    board: dict[str, Any] | None = None

    @field_validator("variables")
    @classmethod
    def _each_name_once(cls, variables: list[TemplateVariable]) -> list[TemplateVariable]:
        names = [v.name for v in variables]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"names a variable more than once: {', '.join(repeated)}")
        return variables

    @field_validator("definition")
    @classmethod
    def _no_template_fields(cls, definition: dict[str, Any]) -> dict[str, Any]:
        named = sorted(_TEMPLATE_FIELDS & definition.keys())
        if named:
            raise ValueError(f"{', '.join(named)}: set by the template, not in its definition")
        return definition


class TemplateBroken(Exception):
    """A template file that does not load: a fault of the code, never of a request."""


@dataclass(frozen=True)
class WorkflowTemplate:
    """A checked template: its source, and its definition and board as compiled templates."""

    source: TemplateSource
    definition: Template
    board: Template | None

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def variables(self) -> dict[str, TemplateVariable]:
        return {v.name: v for v in self.source.variables}

    def values(self, given: Mapping[str, Any], field: str = "variables") -> dict[str, Any]:
        """Every variable's value: `given`'s, else its default. A name that is no variable,
        or a value of the wrong type or out of bounds, is a ValidationFailed naming
        `field.name` (all of them at once)."""
        variables = self.variables
        errors: list[FieldError] = []
        for name, value in given.items():
            variable = variables.get(name)
            if variable is None:
                known = ", ".join(variables) or "none"
                errors.append(
                    FieldError(
                        f"{field}.{name}",
                        f"is not a variable of template {self.name!r} (its variables: {known})",
                    )
                )
            elif (problem := variable.problem(value)) is not None:
                errors.append(FieldError(f"{field}.{name}", problem))
        if errors:
            raise ValidationFailed(errors)
        return {
            name: variable.value(given.get(name, variable.default))
            for name, variable in variables.items()
        }

    def render(self, values: Mapping[str, Any]) -> WorkflowCreate:
        """The definition these values (as `values` returns them) make. Loading checked
        the defaults; should other values within bounds break a rule, the values are
        refused (a 422 on `variables`), never saved as a broken definition."""
        fields = render(self.definition, values) | {"kind": self.source.kind}
        if self.board is not None:
            fields["board"] = render(self.board, values)
        try:
            definition = WorkflowCreate.model_validate(fields)
        except ValidationError as exc:
            raise _refused(self.name, [_pydantic_message(e) for e in exc.errors()]) from None
        issues = validate_workflow(definition.nodes, definition.edges)
        if issues:
            raise _refused(self.name, [issue.message for issue in issues])
        return definition

    def instantiate(self, body: TemplateInstantiate) -> WorkflowCreate:
        """The definition a request makes: rendered with its variables, named as it says,
        in its project."""
        definition = self.render(self.values(body.variables))
        changes: dict[str, Any] = {"project": body.project}
        if body.name is not None:
            changes["name"] = body.name
        return definition.model_copy(update=changes)

    def summary(self) -> WorkflowTemplateSummary:
        source = self.source
        return WorkflowTemplateSummary(
            name=source.name,
            description=source.description,
            kind=source.kind,
            variables=source.variables,
        )

    def read(self) -> WorkflowTemplateRead:
        default = self.render(self.values({}))
        return WorkflowTemplateRead(**self.summary().model_dump(), definition=default)


def _pydantic_message(error: Any) -> str:
    where = ".".join(str(part) for part in error.get("loc", ()))
    return f"{where}: {error.get('msg', 'is invalid')}"


def _refused(template: str, messages: list[str]) -> ValidationFailed:
    return ValidationFailed.field(
        "variables",
        f"with these values template {template!r} makes no valid definition: "
        + "; ".join(messages),
    )


def load_template(text: str, origin: str) -> WorkflowTemplate:
    """A template from its YAML text; TemplateBroken naming `origin` and the fault."""
    import yaml  # here: only a process that reads templates loads it

    try:
        source = TemplateSource.model_validate(yaml.safe_load(text))
        roots = frozenset(v.name for v in source.variables)
        parts = {"definition": source.definition}
        if source.board is not None:
            parts["board"] = source.board
        compiled = compile_templates(parts, roots)
        template = WorkflowTemplate(source, compiled["definition"], compiled.get("board"))
        template.render(template.values({}))
    except (yaml.YAMLError, ValidationError, ValidationFailed) as exc:
        raise TemplateBroken(f"workflow template {origin}: {exc}") from exc
    return template


@functools.cache
def builtin_templates() -> dict[str, WorkflowTemplate]:
    """The built-in templates by name, in the order of their kinds (then of names); loaded
    once. A file is named as its template."""
    found: list[WorkflowTemplate] = []
    for path in sorted(BUILTIN_DIR.glob("*.yaml")):
        template = load_template(path.read_text(encoding="utf-8"), path.name)
        if template.name != path.stem:
            raise TemplateBroken(f"workflow template {path.name}: is named {template.name!r}")
        found.append(template)
    kinds = list(WorkflowKind)
    found.sort(key=lambda t: (kinds.index(t.source.kind), t.name))
    return {template.name: template for template in found}


def get_template(name: str, catalogue: Mapping[str, WorkflowTemplate]) -> WorkflowTemplate:
    """The template of this name (404 `not_found` for none)."""
    template = catalogue.get(name)
    if template is None:
        raise NotFound("workflow template", name)
    return template
