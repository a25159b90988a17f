"""Templates: JSON whose strings may hold `{{ placeholders }}`, rendered with what a fire
knows (a webhook's payload, a schedule's fire time, a chain's source). Nothing runs.

A placeholder holds one operand of the workflow condition language
(`app/workflows/engine/conditions.py`, whose parser reads it): a key (`payload.issue.title`, a
lookup; a missing key is null) or a literal (`{{ '{{' }}` writes two braces). Rules:

- a string that is one placeholder alone takes the value with its JSON type
  (`"{{ payload.labels }}"` is the list);
- a string with text around its placeholders is text: a string value is put in as it is,
  null (a missing key) as nothing, any other value as compact JSON;
- object keys are text, never templates; numbers, booleans and null are kept as they are.

`compile_template` checks a template when its trigger is saved: every placeholder parses,
holds no comparison, and its key starts with a root the trigger's kind provides (its
`roots`, `engine/kinds/`); a `{{` that opens no placeholder is refused too. Errors name
the field by its path (`body.target.context.ticket`). `render` is bounded: past
`MAX_RENDERED_CHARS` it raises `TemplateTooLarge`, which a fire records as its failure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core.errors import FieldError, ValidationFailed
from app.workflows.engine.conditions import ConditionSyntaxError, Key, Operand, parse, value_of

# A sprint ceremony's run target (`RunTarget.sprint`) adds these to any kind's.
CEREMONY_ROOTS = frozenset({"sprint", "velocity"})
MAX_PLACEHOLDERS = 500  # in one trigger's target, all its templates together
MAX_DEPTH = 32  # nesting of a template's objects and lists
MAX_RENDERED_CHARS = 1_000_000  # a rendered template, as JSON text

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


class TemplateTooLarge(ValueError):
    """The rendered template is over `MAX_RENDERED_CHARS`."""


@dataclass(frozen=True)
class Text:
    """A string of a template: text and placeholders in order."""

    parts: tuple[str | Operand, ...]

    @property
    def alone(self) -> Operand | None:
        """The placeholder, when the string is one placeholder and nothing else."""
        if len(self.parts) == 1 and not isinstance(self.parts[0], str):
            return self.parts[0]
        return None


@dataclass(frozen=True)
class Template:
    """A checked template: the JSON with each string that holds a placeholder as a `Text`."""

    tree: Any

    @property
    def is_static(self) -> bool:
        return not _has_text(self.tree)


def _has_text(node: Any) -> bool:
    if isinstance(node, Text):
        return True
    if isinstance(node, dict):
        return any(_has_text(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_text(v) for v in node)
    return False


class _Checker:
    def __init__(self, roots: frozenset[str]) -> None:
        self.roots = roots
        self.errors: list[FieldError] = []
        self.placeholders = 0

    def node(self, value: Any, where: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self.errors.append(FieldError(where, f"nests deeper than {MAX_DEPTH} levels"))
            return None
        if isinstance(value, str):
            return self.text(value, where)
        if isinstance(value, dict):
            return {k: self.node(v, _member(where, k), depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [self.node(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
        return value

    def text(self, value: str, where: str) -> str | Text:
        if "{{" not in value:
            return value
        parts: list[str | Operand] = []
        end = 0
        for match in _PLACEHOLDER.finditer(value):
            if match.start() > end:
                parts.append(value[end : match.start()])
            operand = self.placeholder(match.group(1), where)
            if operand is None:
                return value
            parts.append(operand)
            end = match.end()
        if end < len(value):
            parts.append(value[end:])
        if any(isinstance(p, str) and "{{" in p for p in parts):
            self.errors.append(
                FieldError(
                    where, "`{{` opens no placeholder (for the text itself write {{ '{{' }})"
                )
            )
            return value
        return Text(tuple(parts))

    def placeholder(self, inner: str, where: str) -> Operand | None:
        self.placeholders += 1
        try:
            condition = parse(inner)
        except ConditionSyntaxError as exc:
            self.errors.append(FieldError(where, f"placeholder {{{{{inner}}}}}: {exc}"))
            return None
        if condition.op is not None:
            self.errors.append(
                FieldError(where, f"placeholder {{{{{inner}}}}}: holds a key or a literal only")
            )
            return None
        operand = condition.left
        if isinstance(operand, Key) and operand.path[0] not in self.roots:
            known = ", ".join(sorted(self.roots))
            self.errors.append(
                FieldError(
                    where,
                    f"placeholder {{{{{inner}}}}}: {operand.path[0]!r} is not known here; "
                    f"a key starts with one of: {known}",
                )
            )
            return None
        return operand


def _member(where: str, key: str) -> str:
    simple = key.isidentifier()
    return f"{where}.{key}" if simple else f"{where}[{json.dumps(key)}]"


def compile_template(value: Any, roots: frozenset[str], field: str) -> Template:
    """`value` checked as a template (ValidationFailed naming each bad field under
    `field`)."""
    return compile_templates({field: value}, roots)[field]


def compile_templates(values: Mapping[str, Any], roots: frozenset[str]) -> dict[str, Template]:
    """Several templates of one target, checked together (one error lists every fault,
    and the placeholder bound is for them all): field -> template."""
    checker = _Checker(roots)
    compiled = {field: Template(checker.node(v, field, 0)) for field, v in values.items()}
    if checker.placeholders > MAX_PLACEHOLDERS:
        where = next(iter(values), "body")
        checker.errors.append(
            FieldError(where, f"more than {MAX_PLACEHOLDERS} placeholders in one target")
        )
    if checker.errors:
        raise ValidationFailed(checker.errors)
    return compiled


class _Budget:
    def __init__(self) -> None:
        self.left = MAX_RENDERED_CHARS

    def spend(self, chars: int) -> None:
        self.left -= chars
        if self.left < 0:
            raise TemplateTooLarge(f"the rendered template is over {MAX_RENDERED_CHARS} characters")


def render(template: Template, context: Mapping[str, Any]) -> Any:
    """The template's JSON with every placeholder replaced (TemplateTooLarge past the
    bound)."""
    budget = _Budget()
    return _render(template.tree, context, budget)


def _render(node: Any, context: Mapping[str, Any], budget: _Budget) -> Any:
    if isinstance(node, Text):
        return _render_text(node, context, budget)
    if isinstance(node, dict):
        budget.spend(2 + sum(len(k) + 4 for k in node))
        return {k: _render(v, context, budget) for k, v in node.items()}
    if isinstance(node, list):
        budget.spend(2 + len(node))
        return [_render(v, context, budget) for v in node]
    budget.spend(len(node) + 2 if isinstance(node, str) else 8)
    return node


def _render_text(text: Text, context: Mapping[str, Any], budget: _Budget) -> Any:
    alone = text.alone
    if alone is not None:
        value = value_of(alone, context)
        budget.spend(len(_json(value)))
        return value
    out: list[str] = []
    for part in text.parts:
        piece = part if isinstance(part, str) else as_text(value_of(part, context))
        budget.spend(len(piece))
        out.append(piece)
    return "".join(out)


def as_text(value: Any) -> str:
    """A value as it is put into text: a string as it is, null as nothing, else JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
