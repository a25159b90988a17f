"""Workflow templates as data: each built-in renders a valid definition with its defaults
and with every variable at each of its bounds (a template never renders an invalid one),
values are checked against their variable's type and bounds, and a broken template file
is refused as it loads, saying why."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import yaml

from app.core.errors import ValidationFailed
from app.core.vocabulary import BoardColumn, VariableType, WorkflowKind
from app.workflows.engine.templates.catalogue import (
    TemplateBroken,
    WorkflowTemplate,
    builtin_templates,
    load_template,
)
from app.workflows.engine.workflow_graph import validate_workflow
from app.workflows.schemas.workflow_templates import TemplateInstantiate, TemplateVariable

BUILTINS = builtin_templates()


def corners(template: WorkflowTemplate) -> list[dict[str, Any]]:
    """Every variable at its least and its most (a string: that many characters), in every
    combination."""
    choices: list[list[tuple[str, Any]]] = []
    for variable in template.source.variables:
        low, high = variable.bounds
        if variable.type is VariableType.STRING:
            choices.append([(variable.name, "x" * low), (variable.name, "é" * high)])
        else:
            choices.append([(variable.name, low), (variable.name, high)])
    return [dict(combination) for combination in itertools.product(*choices)]


def test_there_is_a_template_of_each_kind() -> None:
    assert {t.source.kind for t in BUILTINS.values()} == set(WorkflowKind)


@pytest.mark.parametrize("name", list(BUILTINS))
def test_each_builtin_renders_a_valid_definition_at_its_defaults_and_bounds(name: str) -> None:
    template = BUILTINS[name]
    for given in [{}, *corners(template)]:
        definition = template.render(template.values(given))
        assert definition.kind is template.source.kind
        assert validate_workflow(definition.nodes, definition.edges) == [], given


def test_the_variables_go_where_the_template_says() -> None:
    agile = BUILTINS["agile_kanban"]
    definition = agile.instantiate(
        TemplateInstantiate(
            project="atlas", variables={"sprint_length": 10, "wip_limit": 2, "velocity_window": 5}
        )
    )
    assert definition.project == "atlas" and definition.name == "Agile Kanban sprint"
    assert definition.board is not None and definition.board.sprint is not None
    assert [(w.column, w.limit) for w in definition.board.wip_limits] == [
        (BoardColumn.IN_PROGRESS, 2)
    ]
    assert definition.board.sprint.length_days == 10
    assert definition.board.sprint.velocity_window == 5
    assert definition.board.sprint.auto_transition is True
    assert "sprints of 10 days" in definition.description

    parallel = BUILTINS["parallel"].instantiate(
        TemplateInstantiate(name="Mine", variables={"max_parallel": 7, "feature": "search"})
    )
    assert (parallel.name, parallel.max_parallel_tasks, parallel.project) == ("Mine", 7, None)
    retries = BUILTINS["sequential"].render(BUILTINS["sequential"].values({"max_retries": 0}))
    assert {n.config["max_retries"] for n in retries.nodes if n.type == "task"} == {0}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"nope": 1}, "is not a variable of template 'kanban' (its variables: wip_limit, "),
        ({"wip_limit": "3"}, "must be an integer"),
        ({"wip_limit": 101}, "must be from 1 to 100"),
        ({"wip_limit": True}, "must be an integer"),
    ],
)
def test_values_are_checked_by_name_type_and_bounds(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationFailed) as refused:
        BUILTINS["kanban"].values(given)
    [error] = refused.value.errors
    assert error.field == f"variables.{next(iter(given))}"
    assert error.message.startswith(message)


def test_a_string_variable_is_stripped_and_its_length_bounded() -> None:
    variable = TemplateVariable(
        name="feature", type=VariableType.STRING, default="x", maximum=5, description=""
    )
    assert variable.value("  sso ") == "sso"
    assert variable.problem("  sso ") is None
    assert variable.problem("   ") == "must be 1 to 5 characters long (surrounding spaces left out)"
    assert variable.problem("toolong") is not None
    assert variable.problem(3) == "must be a string"


GOOD: dict[str, Any] = {
    "name": "tiny",
    "kind": "kanban",
    "description": "One task.",
    "variables": [{"name": "wip", "type": "int", "default": 2, "minimum": 1, "description": ""}],
    "definition": {
        "name": "Tiny",
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "work", "type": "task", "config": {"title": "Work"}},
            {"id": "end", "type": "end"},
        ],
        "edges": [
            {"id": "e1", "source": "start", "target": "work"},
            {"id": "e2", "source": "work", "target": "end"},
        ],
    },
    "board": {"wip_limits": [{"column": "in_progress", "limit": "{{ wip }}"}]},
}


def broken(**changes: Any) -> str:
    return yaml.safe_dump(GOOD | changes)


def test_a_good_template_loads() -> None:
    template = load_template(broken(), "tiny.yaml")
    board = template.render(template.values({"wip": 5})).board
    assert board is not None and board.wip_limits[0].limit == 5


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("name: [", "tiny.yaml"),
        (broken(kind="scrum"), "kind"),
        (
            broken(board={"wip_limits": [{"column": "in_progress", "limit": "{{ wp }}"}]}),
            "'wp' is not known here",
        ),
        (
            broken(
                variables=[
                    {"name": "wip", "type": "int", "default": 0, "minimum": 1, "description": ""}
                ]
            ),
            "default 0 must be from 1",
        ),
        (
            broken(variables=[{"name": "null", "type": "int", "default": 1, "description": ""}]),
            "is a literal",
        ),
        (
            broken(
                variables=[
                    {"name": "wip", "type": "int", "default": 1, "description": ""},
                    {"name": "wip", "type": "int", "default": 2, "description": ""},
                ]
            ),
            "more than once",
        ),
        (broken(definition=GOOD["definition"] | {"kind": "parallel"}), "set by the template"),
        (
            broken(definition=GOOD["definition"] | {"edges": []}),
            "makes no valid definition",
        ),
        (
            broken(board={"wip_limits": [{"column": "in_progress", "limit": "{{ wip }}x"}]}),
            "makes no valid definition",
        ),
    ],
)
def test_a_broken_template_is_refused_as_it_loads(text: str, says: str) -> None:
    with pytest.raises(TemplateBroken) as refused:
        load_template(text, "tiny.yaml")
    assert "tiny.yaml" in str(refused.value) and says in str(refused.value)
