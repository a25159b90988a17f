"""The condition language of workflow `conditional` nodes: parsed, never `eval`-ed.

    condition := operand [("==" | "!=") operand]
    operand   := literal | key
    literal   := true | false | null | number | 'text' | "text"
    key       := name ("." name)*          # a lookup in the activation context

A lone operand is a truthiness check (a missing key is null, hence false). Equality is
JSON equality: `true` never equals `1`. A condition that does not parse is an error at
the moment it is saved, so a typo can never quietly become "false" at activation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_CONDITION_CHARS = 1_000


class ConditionSyntaxError(ValueError):
    """The text is not a condition; `position` is the 0-based offset of the problem."""

    def __init__(self, message: str, position: int) -> None:
        self.position = position
        super().__init__(f"{message} at position {position}")


@dataclass(frozen=True)
class Literal:
    value: Any


@dataclass(frozen=True)
class Key:
    path: tuple[str, ...]


Operand = Literal | Key


@dataclass(frozen=True)
class Condition:
    left: Operand
    op: str | None = None  # None: a truthiness check of `left`
    right: Operand | None = None


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<op>==|!=)
      | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
      | (?P<key>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    )""",
    re.VERBOSE,
)
_WORDS: dict[str, Any] = {"true": True, "false": False, "null": None}


_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t"}


def _string(token: str, start: int) -> str:
    body, out, i = token[1:-1], [], 0
    while i < len(body):
        char = body[i]
        if char == "\\":
            escaped = _ESCAPES.get(body[i + 1])  # the pattern guarantees a next character
            if escaped is None:
                raise ConditionSyntaxError("unknown escape in a string", start + 1 + i)
            out.append(escaped)
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _operand(text: str, pos: int) -> tuple[Operand, int]:
    match = _TOKEN.match(text, pos)
    if match is None or match.lastgroup == "op":
        raise ConditionSyntaxError("expected a value or a key", _skip_space(text, pos))
    token, end = match.group(match.lastgroup or ""), match.end()
    if match.lastgroup == "string":
        return Literal(_string(token, match.start("string"))), end
    if match.lastgroup == "number":
        try:  # `\d` takes digits JSON does not (`01`, Arabic-Indic): an error, not a crash
            return Literal(json.loads(token)), end
        except ValueError:
            raise ConditionSyntaxError("not a JSON number", match.start("number")) from None
    if token in _WORDS:
        return Literal(_WORDS[token]), end
    return Key(tuple(token.split("."))), end


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def parse(text: str) -> Condition:
    """The condition `text` denotes, or ConditionSyntaxError."""
    if len(text) > MAX_CONDITION_CHARS:
        raise ConditionSyntaxError(f"longer than {MAX_CONDITION_CHARS} characters", 0)
    if not text.strip():
        raise ConditionSyntaxError("empty condition", 0)
    left, pos = _operand(text, 0)
    pos = _skip_space(text, pos)
    if pos == len(text):
        return Condition(left)
    match = _TOKEN.match(text, pos)
    if match is None or match.lastgroup != "op":
        raise ConditionSyntaxError("expected '==' or '!='", pos)
    right, pos = _operand(text, match.end())
    pos = _skip_space(text, pos)
    if pos != len(text):
        raise ConditionSyntaxError("unexpected text after the condition", pos)
    return Condition(left, match.group("op"), right)


def value_of(operand: Operand, context: Mapping[str, Any]) -> Any:
    """A literal's value, or the value a key names in `context` (null when missing)."""
    if isinstance(operand, Literal):
        return operand.value
    value: Any = context
    for name in operand.path:
        if not isinstance(value, Mapping) or name not in value:
            return None
        value = value[name]
    return value


def _equal(a: Any, b: Any) -> bool:
    # Python says True == 1; JSON does not, and neither do we.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    return bool(a == b)


def evaluate(condition: Condition, context: Mapping[str, Any]) -> bool:
    left = value_of(condition.left, context)
    if condition.op is None or condition.right is None:
        return bool(left)
    equal = _equal(left, value_of(condition.right, context))
    return equal if condition.op == "==" else not equal
