"""The terminal client behind `loopwright run` and `loopwright runs`: plain HTTP against a
running server, following a run's events over SSE until it settles."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any, TextIO

import httpx

DEMO_AGENT = {
    "name": "demo",
    "role": "demo assistant",
    "system_prompt": "You are Loopwright's demo agent.",
    "tools": ["echo"],
    "model": {
        "provider": "scripted",
        "name": "scripted-demo",
        "script": [
            {"tool_calls": [{"name": "echo", "input": {"note": "thinking out loud"}}]},
            {
                "text": "Hello from the Loopwright demo agent. Your run went through a tool call "
                "and came back; give an agent a real model to do real work."
            },
        ],
    },
}
SETTLED = {"completed", "failed", "cancelled", "timed_out", "dead_letter"}


class Client:
    def __init__(self, base_url: str, api_key: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=30)

    def close(self) -> None:
        self.http.close()

    def _json(self, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            try:
                problem = response.json()
                message = f"{problem.get('code')}: {problem.get('detail')}"
            except ValueError:
                message = response.text[:200]
            raise SystemExit(f"loopwright: {response.status_code} {message}")
        return response.json()

    def demo_agent_id(self) -> str:
        agents = self._json(self.http.get("/v1/agents", params={"limit": 200}))["items"]
        for agent in agents:
            if agent["name"] == "demo":
                return str(agent["id"])
        return str(self._json(self.http.post("/v1/agents", json=DEMO_AGENT))["id"])

    def start(self, agent_id: str, text: str, conversation_id: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"agent_id": agent_id, "input": text}
        if conversation_id:
            body["conversation_id"] = conversation_id
        result: dict[str, Any] = self._json(self.http.post("/v1/runs", json=body))
        return result

    def events(self, run_id: str) -> Iterator[tuple[str, dict[str, Any]]]:
        with self.http.stream("GET", f"/v1/runs/{run_id}/events", timeout=None) as response:
            event, data = "", ""
            for line in response.iter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data += line[5:].strip()
                elif line == "" and event:
                    yield event, json.loads(data or "{}")
                    event, data = "", ""

    def runs(self, status: str | None) -> list[dict[str, Any]]:
        params = {"status": status} if status else {}
        items: list[dict[str, Any]] = self._json(self.http.get("/v1/runs", params=params))["items"]
        return items


def follow(client: Client, run_id: str, out: TextIO = sys.stdout) -> str:
    """Print a run's events as they come; returns its final status."""
    for event, data in client.events(run_id):
        if event == "message.delta":
            out.write(data.get("text", ""))
        elif event == "message.created" and data.get("role") == "assistant":
            for block in data.get("content", []):
                if block.get("type") == "text":
                    out.write(f"\nassistant: {block['text']}\n")
                elif block.get("type") == "tool_use":
                    out.write(f"  → {block['name']} {json.dumps(block['input'])}\n")
        elif event == "tool_call.completed":
            mark = "✗" if data.get("is_error") else "✓"
            out.write(f"  {mark} {str(data.get('result', ''))[:200]}\n")
        elif event == "agent_run.waiting_on_human":
            out.write(
                f"\n? {data.get('question')}\n"
                f"  (answer with POST /v1/runs/{run_id}/human-response)\n"
            )
            return "waiting_on_human"
        elif data.get("status") in SETTLED and event.startswith("agent_run."):
            detail = data.get("error") or data.get("stop_reason") or ""
            out.write(f"\n[{data['status']}] {detail}\n")
            return str(data["status"])
        out.flush()
    return "unknown"
