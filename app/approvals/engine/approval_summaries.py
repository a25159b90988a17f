"""The context summary of an approval: a short text a person can decide from without
opening the run or the task.

- a tool call: the agent's name, what the model said it was about to do (the run's latest
  assistant text up to the call), and the call's arguments, abbreviated;
- a task review: the task's title, its acceptance criteria, and the result the run
  handed in.

Every part has its own budget so that one long part (a huge argument, a long result)
cannot crowd out the others, and the whole is at most `SUMMARY_MAX_CHARS` (the column's
CHECK says so too). Pure functions: the engine reads the inputs in its transaction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from app.core.vocabulary import SUMMARY_MAX_CHARS

ELLIPSIS = "…"

_INTENT_CHARS = 380
_ARGUMENTS_CHARS = 380
_NAME_CHARS = 80  # an agent's or a tool's name
_TITLE_CHARS = 150
_CRITERION_CHARS = 100
_CRITERIA_SHOWN = 5
_STRING_CHARS = 80  # one string inside the arguments
_ITEMS_SHOWN = 5  # of one list or object inside the arguments
_DEPTH = 3  # nesting of the arguments shown

NO_INTENT = "(the agent said nothing before this call)"
NO_RUN = "(no agent run: the task was handed in by a person)"
NO_RESULT = "(the run returned no text)"

_SPACE = re.compile(r"\s+")


def clip(text: str, limit: int) -> str:
    """`text` with its whitespace runs collapsed, cut to `limit` characters (an ellipsis
    marks the cut)."""
    flat = _SPACE.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    return flat[: limit - len(ELLIPSIS)].rstrip() + ELLIPSIS


def _shrink(value: Any, depth: int) -> Any:
    """A smaller copy of a JSON value: long strings cut, long lists and objects cut with
    a count of what was left out, deep nesting elided."""
    if isinstance(value, str):
        return clip(value, _STRING_CHARS)
    if isinstance(value, dict):
        if depth >= _DEPTH:
            return f"{{{len(value)} keys}}"
        items = list(value.items())
        shrunk = {str(k): _shrink(v, depth + 1) for k, v in items[:_ITEMS_SHOWN]}
        if len(items) > _ITEMS_SHOWN:
            shrunk[ELLIPSIS] = f"{len(items) - _ITEMS_SHOWN} more keys"
        return shrunk
    if isinstance(value, list):
        if depth >= _DEPTH:
            return f"[{len(value)} items]"
        shown = [_shrink(v, depth + 1) for v in value[:_ITEMS_SHOWN]]
        if len(value) > _ITEMS_SHOWN:
            shown.append(f"{ELLIPSIS} {len(value) - _ITEMS_SHOWN} more items")
        return shown
    return value


def abbreviate_arguments(arguments: dict[str, Any], limit: int = _ARGUMENTS_CHARS) -> str:
    """The arguments as compact JSON a person can read at a glance, at most `limit` chars.
    What runs is the approval's full `arguments`; this is only what the summary shows."""
    text = json.dumps(_shrink(arguments, 0), ensure_ascii=False, separators=(", ", ": "))
    return clip(text, limit)


def tool_call_summary(
    agent_name: str, tool: str, arguments: dict[str, Any], intent: str | None
) -> str:
    stated = clip(intent, _INTENT_CHARS) if intent and intent.strip() else NO_INTENT
    lines = [
        f"Agent {clip(agent_name, _NAME_CHARS)!r} asks to call {clip(tool, _NAME_CHARS)!r}.",
        f"Intent: {stated}",
        f"Arguments: {abbreviate_arguments(arguments)}",
    ]
    return clip_lines(lines)


def review_summary(
    title: str, acceptance_criteria: Sequence[str], run_id: str | None, result: str | None
) -> str:
    lines = [f"Task: {clip(title, _TITLE_CHARS)}"]
    if acceptance_criteria:
        lines.append("Acceptance criteria:")
        lines += [f"- {clip(c, _CRITERION_CHARS)}" for c in acceptance_criteria[:_CRITERIA_SHOWN]]
        if len(acceptance_criteria) > _CRITERIA_SHOWN:
            lines.append(f"- {ELLIPSIS} and {len(acceptance_criteria) - _CRITERIA_SHOWN} more")
    else:
        lines.append("Acceptance criteria: (none given)")
    if run_id is None:
        lines.append(f"Result: {NO_RUN}")
    else:
        used = sum(len(line) + 1 for line in lines)
        room = max(SUMMARY_MAX_CHARS - used - len("Result of run : ") - len(run_id), 40)
        stated = clip(result, room) if result and result.strip() else NO_RESULT
        lines.append(f"Result of run {run_id}: {stated}")
    return clip_lines(lines)


def clip_lines(lines: Sequence[str]) -> str:
    """The lines joined, cut to `SUMMARY_MAX_CHARS`: a safety net, the parts' budgets
    add up to less (only a review's run id is not budgeted, and ids are short)."""
    text = "\n".join(lines)
    if len(text) <= SUMMARY_MAX_CHARS:
        return text
    return text[: SUMMARY_MAX_CHARS - len(ELLIPSIS)] + ELLIPSIS
