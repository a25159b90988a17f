"""A decomposition's subtask DAG: its schema bounds, the rules beyond them (each problem
naming its field) and its waves. (A wave's concurrency is the coordinator's: the next
subtask starts when one settles.)"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from app.coordination.engine.dag import SubtaskDag, problems
from app.coordination.schemas import MAX_SUBTASKS, Decomposition
from app.core.errors import FieldError, ValidationFailed


def subtask(*depends_on: int | str, key: str | None = None) -> dict[str, Any]:
    return {
        "key": key,
        "title": f"step {key}",
        "acceptance_criteria": ["it works"],
        "depends_on": list(depends_on),
    }


def decomposition(*subtasks: dict[str, Any]) -> Decomposition:
    return Decomposition.model_validate({"subtasks": list(subtasks)})


def fields(found: list[FieldError]) -> list[str]:
    return [f.field for f in found]


PROBLEMS = [
    # subtasks, the fields at fault, a phrase of the first message
    ([subtask(1)], ["body.subtasks[0].depends_on[0]"], "no subtask 1 (the indices are 0 to 0)"),
    ([subtask("nope")], ["body.subtasks[0].depends_on[0]"], "no subtask has the key 'nope'"),
    ([subtask(), subtask(1)], ["body.subtasks[1].depends_on[0]"], "cannot depend on itself"),
    (
        [subtask(key="a"), subtask(key="a"), subtask("a")],  # "a" names subtask 0
        ["body.subtasks[1].key"],
        "the key 'a' is subtask 0's already",
    ),
    ([subtask(1), subtask(0)], ["body.subtasks[1].depends_on[0]"], "the cycle 0 -> 1 -> 0"),
    (
        [subtask(), subtask(3, key="b"), subtask("b"), subtask(2)],
        ["body.subtasks[2].depends_on[0]"],  # the walk from 1 closes it at 2's "b"
        "the cycle 1 -> 3 -> 2 -> 1",
    ),
]


@pytest.mark.parametrize(("subtasks", "at_fault", "phrase"), PROBLEMS)
def test_problems_name_the_field(
    subtasks: list[dict[str, Any]], at_fault: list[str], phrase: str
) -> None:
    found = problems(decomposition(*subtasks))
    assert fields(found) == at_fault
    assert phrase in found[0].message
    with pytest.raises(ValidationFailed) as raised:
        SubtaskDag.of(decomposition(*subtasks))
    assert raised.value.errors == found


def test_a_self_dependency_is_reported_once_not_also_as_a_cycle() -> None:
    found = problems(decomposition(subtask(0)))
    assert [f.message for f in found] == ["a subtask cannot depend on itself"]


def test_problems_are_named_under_the_decompositions_path() -> None:
    found = problems(decomposition(subtask("x")), where="body.decomposition")
    assert fields(found) == ["body.decomposition.subtasks[0].depends_on[0]"]


def test_two_cycles_are_both_named() -> None:
    found = problems(decomposition(subtask(1), subtask(0), subtask(3), subtask(2)))
    assert [f.message.split(" (")[0] for f in found] == [
        "closes the cycle 0 -> 1 -> 0",
        "closes the cycle 2 -> 3 -> 2",
    ]


SCHEMA_BOUNDS = [
    {"subtasks": []},
    {"subtasks": [subtask()] * (MAX_SUBTASKS + 1)},
    {"subtasks": [subtask() | {"acceptance_criteria": []}]},
    {"subtasks": [subtask() | {"acceptance_criteria": ["ok"] * 11}]},
    {"subtasks": [subtask() | {"acceptance_criteria": ["  "]}]},
    {"subtasks": [subtask(-1)]},
    {"subtasks": [subtask(MAX_SUBTASKS)]},
    {"subtasks": [subtask() | {"assignee": "x"}]},  # extra fields are refused
]


@pytest.mark.parametrize("body", SCHEMA_BOUNDS)
def test_the_schema_refuses(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Decomposition.model_validate(body)


def test_the_largest_decomposition_is_accepted() -> None:
    chain = [subtask(*([i - 1] if i else [])) for i in range(MAX_SUBTASKS)]
    dag = SubtaskDag.of(decomposition(*chain))
    assert len(dag.waves()) == MAX_SUBTASKS


WAVES = [
    # subtasks, waves
    ([subtask()], [[0]]),
    ([subtask(), subtask(0), subtask(1)], [[0], [1], [2]]),  # chain
    ([subtask(), subtask(0), subtask(0), subtask(1, 2)], [[0], [1, 2], [3]]),  # diamond
    ([subtask(), subtask(), subtask(), subtask()], [[0, 1, 2, 3]]),  # wide
    # listed out of order, by key, a dependency named twice
    (
        [subtask("last"), subtask(key="first"), subtask(1, "first", key="last")],
        [[1], [2], [0]],
    ),
    ([subtask(), subtask(0), subtask(), subtask(1, 2)], [[0, 2], [1], [3]]),  # uneven
]


@pytest.mark.parametrize(("subtasks", "waves"), WAVES)
def test_waves_are_topological_layers(
    subtasks: list[dict[str, Any]], waves: list[list[int]]
) -> None:
    assert SubtaskDag.of(decomposition(*subtasks)).waves() == waves


def test_dependencies_are_indices_without_repeats() -> None:
    dag = SubtaskDag.of(decomposition(subtask(key="a"), subtask("a", 0)))
    assert dag.dependencies == ((), (0,))
