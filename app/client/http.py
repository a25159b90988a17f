"""Requests to a Loopwright server, with failures as one line a person can act on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from app.client.exits import Exit

DEFAULT_URL = "http://127.0.0.1:8000"


class ClientError(Exception):
    """A request that did not succeed: `str()` is the line to print, `exit_code` why."""

    def __init__(self, message: str, exit_code: Exit = Exit.REQUEST_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Event:
    """One server-sent event; `id` is None for previews that are not persisted."""

    type: str
    data: dict[str, Any]
    id: str | None


class Client:
    def __init__(self, base_url: str, api_key: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self.http = httpx.Client(base_url=self.base_url, headers=headers, timeout=30)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def get(self, path: str, **params: Any) -> Any:
        return self._request("GET", path, params={k: v for k, v in params.items() if v})

    def post(self, path: str, body: Any = None) -> Any:
        return self._request("POST", path, json=body)

    def put(self, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
        return self._request("PUT", path, json=body, headers=headers)

    def delete(self, path: str) -> Any:
        """The answer's body (None for a 204)."""
        return self._request("DELETE", path)

    def post_raw(self, path: str, content: bytes, headers: dict[str, str]) -> Any:
        """A body sent as these exact bytes (a signed webhook delivery)."""
        return self._request("POST", path, content=content, headers=headers)

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        if response.status_code >= 400:
            raise ClientError(_problem_line(response))
        return None if response.status_code == 204 else response.json()

    def events(self, run_id: str, after: str) -> Iterator[Event]:
        """The run's events after event id `after`, until the server ends the stream (it
        does once the run settled) or the connection drops."""
        return self.stream(f"/v1/runs/{run_id}/events", after)

    def stream(self, path: str, after: str) -> Iterator[Event]:
        """An event stream's events after event id `after`, until the server ends it or the
        connection drops (a stream that does not end is for the caller to leave)."""
        try:
            with self.http.stream(
                "GET",
                path,
                headers={"Last-Event-ID": after},
                timeout=httpx.Timeout(30, read=None),
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ClientError(_problem_line(response))
                yield from _parse(response.iter_lines())
        except httpx.ConnectError as exc:
            raise self._unreachable(exc) from exc

    def _unreachable(self, exc: Exception) -> ClientError:
        return ClientError(
            f"cannot reach a Loopwright server at {self.base_url} ({type(exc).__name__}). "
            "Start one with `make serve` (or `loopwright serve`), or point LOOPWRIGHT_URL "
            "at yours.",
            Exit.UNREACHABLE,
        )


def segment(value: str) -> str:
    """An id or name as one path segment: a `/` in it stays in it."""
    return quote(value, safe="")


def all_pages(client: Client, path: str, **params: Any) -> list[dict[str, Any]]:
    """Every item of a paged list, page after page."""
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = client.get(path, limit=200, cursor=cursor, **params)
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def _parse(lines: Iterator[str]) -> Iterator[Event]:
    kind, data, event_id = "", "", None
    for line in lines:
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line == "":
            if kind:
                yield Event(kind, json.loads(data or "{}"), event_id)
            kind, data, event_id = "", "", None


def _problem_line(response: httpx.Response) -> str:
    """`404 not_found: run 'x' does not exist`, with a validation problem's fields."""
    try:
        problem = response.json()
    except ValueError:
        return f"{response.status_code} {response.text[:200]}"
    detail = str(problem.get("detail"))
    line = f"{response.status_code} {problem.get('code')}: {detail}"
    for error in problem.get("errors") or []:
        if error.get("message") not in detail:  # a one-field problem says it in its detail
            line += f"\n  {error.get('field')}: {error.get('message')}"
    return line
