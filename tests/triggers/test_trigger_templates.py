"""Trigger templates: a placeholder alone keeps its value's JSON type, text around it makes
text; keys read the fire's context with the condition language's key syntax; a template
that could not render is refused when saved, naming the field; rendering is bounded."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.errors import ValidationFailed
from app.core.vocabulary import TriggerKind
from app.triggers.engine import templates
from app.triggers.engine.kinds import KINDS
from app.triggers.engine.templates import (
    TemplateTooLarge,
    as_text,
    compile_template,
    compile_templates,
    render,
)

WEBHOOK = KINDS.of(TriggerKind.WEBHOOK).roots
CONTEXT: dict[str, Any] = {
    "payload": {
        "issue": {"title": "Crash on save", "number": 7, "labels": ["bug", "p1"]},
        "draft": False,
        "nothing": None,
    },
    "trigger": {"id": "trg_1", "name": "issues", "kind": "webhook"},
    "fired_at": "2026-01-01T00:00:00+00:00",
}


def rendered(template: Any) -> Any:
    return render(compile_template(template, WEBHOOK, "body.target.context"), CONTEXT)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ payload.issue.title }}", "Crash on save"),
        ("{{payload.issue.number}}", 7),
        ("{{ payload.issue.labels }}", ["bug", "p1"]),
        ("{{ payload.draft }}", False),
        ("{{ payload.missing.deeper }}", None),
        ("{{ payload.issue }}", {"title": "Crash on save", "number": 7, "labels": ["bug", "p1"]}),
        ("#{{ payload.issue.number }}: {{ payload.issue.title }}", "#7: Crash on save"),
        ("labels={{ payload.issue.labels }}", 'labels=["bug","p1"]'),
        ("[{{ payload.missing }}]", "[]"),
        ("[{{ payload.nothing }}] {{ payload.draft }}", "[] false"),
        ("{{ '{{' }} literal", "{{ literal"),
        ("{{ 42 }}", 42),
        ("no placeholders, {single} braces }}", "no placeholders, {single} braces }}"),
        (
            {"ticket": "{{ payload.issue.number }}", "tags": ["{{ trigger.name }}", 3, None]},
            {"ticket": 7, "tags": ["issues", 3, None]},
        ),
        ({"{{ not a key }}": 1}, {"{{ not a key }}": 1}),  # keys are text, never templates
    ],
)
def test_rendering(template: Any, expected: Any) -> None:
    assert rendered(template) == expected


def faults(template: Any, roots: frozenset[str] = WEBHOOK) -> list[tuple[str, str]]:
    with pytest.raises(ValidationFailed) as caught:
        compile_template(template, roots, "body.target.context")
    return [(e.field, e.message) for e in caught.value.errors]


def test_a_placeholder_that_does_not_parse_is_refused_naming_its_field() -> None:
    ((field, message),) = faults({"ticket": {"id": "{{ payload. }}"}})
    assert field == "body.target.context.ticket.id"
    assert "{{ payload. }}" in message


def test_each_fault_is_named_lists_and_odd_keys_included() -> None:
    found = faults(
        {
            "a": ["ok", "{{ 1 == 1 }}"],
            "odd key": "{{ secrets.token }}",
            "b": "{{ open",
        }
    )
    assert [field for field, _ in found] == [
        "body.target.context.a[1]",
        'body.target.context["odd key"]',
        "body.target.context.b",
    ]
    assert "holds a key or a literal only" in found[0][1]
    assert "'secrets' is not known here" in found[1][1] and "payload" in found[1][1]
    assert "opens no placeholder" in found[2][1]


def test_roots_depend_on_the_kind() -> None:
    schedule = KINDS.of(TriggerKind.SCHEDULE).roots
    assert compile_template("{{ fire_time }}", schedule, "f").tree is not None
    assert faults("{{ payload.x }}", schedule)[0][0] == "body.target.context"
    chain = KINDS.of(TriggerKind.CHAIN).roots
    assert (
        render(compile_template("{{ source.result }}", chain, "f"), {"source": {"result": 1}}) == 1
    )


def test_a_static_template_is_kept_as_it_is() -> None:
    template = compile_template({"a": [1, "two"]}, WEBHOOK, "f")
    assert template.is_static and render(template, {}) == {"a": [1, "two"]}
    assert not compile_template(["{{ payload }}"], WEBHOOK, "f").is_static


def test_bounds_on_depth_and_placeholders(monkeypatch: pytest.MonkeyPatch) -> None:
    deep: Any = "x"
    for _ in range(templates.MAX_DEPTH + 1):
        deep = [deep]
    assert "nests deeper" in faults(deep)[0][1]
    monkeypatch.setattr(templates, "MAX_PLACEHOLDERS", 2)
    with pytest.raises(ValidationFailed) as caught:
        compile_templates(
            {
                "body.target.input": "{{ payload }}",
                "body.target.metadata": {"a": "{{ payload }}", "b": "{{ payload }}"},
            },
            WEBHOOK,
        )
    assert caught.value.errors[0].field == "body.target.input"
    assert "more than 2 placeholders" in caught.value.errors[0].message


def test_rendering_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templates, "MAX_RENDERED_CHARS", 50)
    big = {"payload": {"text": "y" * 60}}
    for template in ("{{ payload.text }}", "say {{ payload.text }}", ["{{ payload }}"], "z" * 60):
        with pytest.raises(TemplateTooLarge):
            render(compile_template(template, WEBHOOK, "f"), big)
    assert render(compile_template({"k": 1, "l": [True]}, WEBHOOK, "f"), big) == {
        "k": 1,
        "l": [True],
    }


def test_values_as_text() -> None:
    assert [as_text(v) for v in (None, "s", 1, 1.5, True, {"a": "é"})] == [
        "",
        "s",
        "1",
        "1.5",
        "true",
        '{"a":"é"}',
    ]
