"""Rules of a valid transcript: every `tool_use` of an assistant message is answered by a
`tool_result` in the next user message, and user messages may be merged."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.llm.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock


def pending_tool_uses(messages: Sequence[Message]) -> list[ToolUseBlock]:
    """The tool calls of the last assistant message, when no results follow it yet."""
    if not messages or messages[-1].role != "assistant":
        return []
    return messages[-1].tool_uses


def results_message(
    pending: Sequence[ToolUseBlock], results: Mapping[str, tuple[str, bool]], missing: str
) -> Message:
    """One user message answering each pending call from `results` (id -> (content,
    is_error)); a call without a result is answered with the error `missing`."""
    blocks: list[ToolResultBlock | TextBlock] = []
    for call in pending:
        content, is_error = results.get(call.id, (missing, True))
        blocks.append(ToolResultBlock(tool_use_id=call.id, content=content, is_error=is_error))
    return Message(role="user", content=list(blocks))


def for_provider(messages: Sequence[Message]) -> list[Message]:
    """The transcript as providers accept it: consecutive user messages (a cancelled run's
    tool results followed by the next run's input) merged into one."""
    merged: list[Message] = []
    for message in messages:
        if merged and message.role == "user" and merged[-1].role == "user":
            merged[-1] = Message(role="user", content=[*merged[-1].content, *message.content])
        else:
            merged.append(message)
    return merged


def last_assistant_text(messages: Sequence[Message]) -> str | None:
    for message in reversed(messages):
        if message.role == "assistant" and message.text:
            return message.text
    return None
