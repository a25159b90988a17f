"""The provider-neutral transcript: messages of text, tool_use and tool_result blocks.

This is what is stored, shown to clients and sent to providers (the shapes follow the
Anthropic Messages API, which providers translate from). Every `tool_use` an assistant
message carries is answered by a `tool_result` in the next user message (the rules of a
valid transcript are the functions at the end), and user messages may be merged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Role(StrEnum):
    """Who a message is from: the person or program that started the run (its input and
    the tools' results), or the model."""

    USER = "user"
    ASSISTANT = "assistant"


class TextBlock(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


# A tool call whose arguments the model wrote as something other than a JSON object (a
# provider that receives them as text, Chat Completions, cannot always parse them): the
# text is kept under this key, the input's only one. The tool runner answers such a call
# with an error quoting the text instead of running the tool, so the model can correct it.
UNPARSED_ARGUMENTS = "__unparsed_arguments__"


def unparsed_arguments(call: ToolUseBlock) -> str | None:
    """The text of a call's arguments that were not a JSON object; None for a call whose
    arguments were."""
    raw = call.input.get(UNPARSED_ARGUMENTS)
    return raw if isinstance(raw, str) and len(call.input) == 1 else None


Block = Annotated[TextBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")]


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Role
    content: list[Block]

    @classmethod
    def user_text(cls, text: str) -> Message:
        return cls(role="user", content=[TextBlock(text=text)])

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


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
