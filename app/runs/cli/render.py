"""A run's events as lines for a person: the model's text as it streams, each tool call
and its result, and every other event (failures and retries with their error) in one
line each."""

from __future__ import annotations

import json
from typing import Any, TextIO

from app.client.http import Event
from app.core.states import RUN_SETTLED

SETTLED = frozenset(status.value for status in RUN_SETTLED)
# What every event of a run carries: left out of the generic line.
_COMMON = {"run_id", "status", "at", "lane"}
_PREVIEW = 200  # characters of an argument list or a result


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def _error(data: dict[str, Any]) -> str:
    error = data.get("error")
    if isinstance(error, dict):
        return _short(error.get("message") or error)
    return _short(error) if error else ""


def _plan_line(kind: str, data: dict[str, Any]) -> str:
    """A plan's move: steps numbered from 1, as the run page shows them."""
    step = f"step {data['step'] + 1}" if isinstance(data.get("step"), int) else "step"
    if kind == "plan.created":
        return f"▤ plan: {data.get('steps')} steps"
    if kind == "plan.replanned":
        return f"▤ replanned ({data.get('replans')}): {data.get('steps')} steps"
    if kind == "plan.step.started":
        return f"▸ {step}: {_short(data.get('goal', ''))}"
    if kind == "plan.step.completed":
        return f"✓ {step} done: {_short(data.get('result', ''))}"
    if kind == "plan.step.failed":
        return f"✗ {step} failed: {_short(data.get('reason', ''))}"
    extra = {k: v for k, v in data.items() if k not in _COMMON}
    return f"· {kind} {_short(extra)}"


class Printer:
    """Writes each event as it comes; the text a model streamed is not written twice."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._streamed = ""  # text previews of the message being written
        self._mid_line = False

    def show(self, event: Event) -> None:
        if event.type == "message.delta":
            text = str(event.data.get("text", ""))
            self._write(("" if self._streamed else "assistant: ") + text, end="")
            self._streamed += text
            return
        line = self._line(event)
        if line is not None:
            self._write(line)

    def say(self, line: str) -> None:
        self._write(line)

    def _write(self, text: str, end: str = "\n") -> None:
        if end and self._mid_line:  # a full line after streamed text starts on its own
            self.out.write("\n")
        self.out.write(text + end)
        self._mid_line = not end and not text.endswith("\n")
        self.out.flush()

    def _line(self, event: Event) -> str | None:
        data, kind = event.data, event.type
        if kind == "message.created":
            return self._message(data)
        if kind == "tool_call.started":
            return None  # its call was shown with the model's message
        if kind == "tool_call.completed":
            mark = "✗" if data.get("is_error") else "✓"
            return f"  {mark} {_short(data.get('result', ''))}"
        if kind == "agent_run.failed":
            will_retry = data.get("status") == "queued"
            return f"✗ failed{' (it will be retried)' if will_retry else ''}: {_error(data)}"
        if kind == "agent_run.retry_scheduled":
            return f"↻ retry {data.get('attempt')} in {data.get('delay_s')} s"
        if kind == "agent_run.waiting_on_human":
            return f"? {data.get('question')}"
        if kind.startswith("plan."):
            return _plan_line(kind, data)
        if kind.startswith("agent_run.") and data.get("status") in SETTLED:
            reason = data.get("stop_reason") or ""
            detail = _error(data) or reason
            return f"[{data['status']}]{' ' + detail if detail else ''}"
        extra = {k: v for k, v in data.items() if k not in _COMMON}
        return f"· {kind}{' ' + _short(extra) if extra else ''}"

    def _message(self, data: dict[str, Any]) -> str | None:
        if data.get("role") != "assistant":
            return None  # the input, and tool results (shown as each call completes)
        lines: list[str] = []
        for block in data.get("content", []):
            if block.get("type") == "text":
                text = str(block.get("text", ""))
                if text and text != self._streamed:  # not already streamed
                    lines.append(f"assistant: {text}")
            elif block.get("type") == "tool_use":
                lines.append(f"  → {block.get('name')} {_short(block.get('input', {}))}")
        self._streamed = ""
        return "\n".join(lines) if lines else None
