"""The workflow condition language: what parses, what it means, what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from app.workflows.engine.conditions import ConditionSyntaxError, evaluate, parse

CONTEXT: dict[str, Any] = {
    "approved": True,
    "rejected": False,
    "env": "prod",
    "count": 3,
    "ratio": 0.5,
    "empty": "",
    "nothing": None,
    "ticket": {"priority": "high", "labels": ["bug"]},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("false", False),
        ("null", False),
        ("approved", True),
        ("rejected", False),
        ("missing", False),
        ("empty", False),
        ("ticket.labels", True),
        ("ticket.missing.deeper", False),
        ("env == 'prod'", True),
        ('env == "prod"', True),
        ("env != 'prod'", False),
        ("env != 'dev'", True),
        ("'prod' == env", True),
        ("count == 3", True),
        ("count == 3.0", True),
        ("ratio == 0.5", True),
        ("count != 4", True),
        ("approved == true", True),
        ("approved == 1", False),  # JSON equality: true is not 1
        ("count == true", False),
        ("nothing == null", True),
        ("missing == null", True),
        ("ticket.priority == 'high'", True),
        ("env == ticket.priority", False),
        ("  env   ==   'prod'  ", True),
        ("env=='prod'", True),
        (r"'it\'s' == 'it\'s'", True),
        (r"'a\\b' != 'a\\\\b'", True),
        ("count == -3", False),
        ("count == 3e0", True),
    ],
)
def test_parses_and_evaluates(text: str, expected: bool) -> None:
    assert evaluate(parse(text), CONTEXT) is expected


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("", 0),
        ("   ", 0),
        ("env =", 4),
        ("env = 'prod'", 4),
        ("env ==", 6),
        ("== 'prod'", 0),
        ("env == 'prod' extra", 14),
        ("env 'prod'", 4),
        ("env == 'unterminated", 7),
        ("a and b", 2),
        ("env === 'prod'", 6),
        ("1.", 1),
        ("-", 0),
        ("__import__('os').system('x')", 10),
        ("env == 'prod' or true", 14),
        (r"'\q' == x", 1),
        ("x" * 1_001, 0),
    ],
)
def test_rejects_what_is_not_a_condition(text: str, position: int) -> None:
    with pytest.raises(ConditionSyntaxError) as caught:
        parse(text)
    assert caught.value.position == position


def test_no_code_runs_however_the_text_looks() -> None:
    # A key that names a Python builtin is only ever a lookup in the context.
    assert evaluate(parse("__import__"), {}) is False
    assert evaluate(parse("__class__ == 'x'"), {"__class__": "x"}) is True
