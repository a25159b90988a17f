"""Token estimates: the real cl100k_base encoding, loaded from the file the package ships
(no network), and counts of whole requests that are plausible and stable."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from app.core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from app.llm import tokens
from app.llm.provider import ToolSpec

ROOT = Path(__file__).resolve().parents[2]


def test_the_encoding_is_cl100k_base_and_loads_with_the_network_refused(tmp_path: Path) -> None:
    """A fresh interpreter whose sockets refuse to connect, with an empty tiktoken cache,
    still loads the encoding and gets cl100k_base's well-known ids."""
    script = textwrap.dedent(
        """
        import socket

        def refuse(*args, **kwargs):
            raise OSError("no network in this test")

        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse

        from app.llm import tokens

        print(tokens.encoding().encode("hello world"), tokens.count_text("hello world"))
        """
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[15339,", "1917]", "2"]


def test_text_counts_are_plausible_and_stable() -> None:
    prose = "The quick brown fox jumps over the lazy dog. " * 100  # 900 words
    assert tokens.count_text("") == 0
    assert 900 <= tokens.count_text(prose) <= 1_200
    assert tokens.count_text(prose) == tokens.count_text(prose[:-1] + " ")
    assert tokens.count_text("<|endoftext|>") > 1  # special-token markers are just text


def test_every_kind_of_block_counts() -> None:
    text = Message.user_text("please look this up")
    call = Message(
        role="assistant",
        content=[ToolUseBlock(id="t1", name="web_search", input={"query": "tiktoken offline"})],
    )
    result = Message(
        role="user", content=[ToolResultBlock(tool_use_id="t1", content="found " * 50)]
    )
    empty_text = Message(role="user", content=[TextBlock(text="")])

    bare = tokens.count_message(empty_text)
    assert tokens.count_message(text) > bare
    assert tokens.count_message(call) > bare + tokens.count_text("tiktoken offline")
    assert tokens.count_message(result) >= bare + 50


def test_tool_input_counts_the_same_whatever_its_key_order() -> None:
    one = ToolUseBlock(id="t", name="f", input={"a": 1, "b": [1, 2]})
    two = ToolUseBlock(id="t", name="f", input={"b": [1, 2], "a": 1})
    assert tokens.count_message(Message(role="assistant", content=[one])) == tokens.count_message(
        Message(role="assistant", content=[two])
    )


def test_a_request_counts_system_prompt_tools_and_messages() -> None:
    messages = [Message.user_text("hi"), Message(role="assistant", content=[TextBlock(text="yo")])]
    tool = ToolSpec("echo", "Echo the text back.", {"type": "object", "properties": {}})
    just_messages = tokens.count_request("", messages)

    assert just_messages == sum(tokens.count_message(m) for m in messages)
    assert tokens.count_request("You are terse.", messages) == just_messages + 4
    assert tokens.count_request("", messages, [tool]) > just_messages + 5
    assert tokens.count_request("", messages) == just_messages  # nothing carried over
