"""The dashboard's pages and fragments as HTML over HTTP (the browser tests in tests/ui
drive them live): paging, filters, the fragments' answers when there is nothing to show,
escaping, and the security headers."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from app.approvals import ui as approvals_page
from app.core.ids import id_floor
from app.runs.ui import runs as runs_page
from tests.support import factories
from tests.support.factories import settle, start_run

# Agent bodies without a name: each agent made of one gets a unique name (`make_agent`).
ASKER: dict[str, Any] = {
    "tools": ["ask_human"],
    "model": {
        "provider": "scripted",
        "name": "s",
        "script": [
            {"tool_calls": [{"name": "ask_human", "input": {"question": "<b>Which</b> colour?"}}]},
            {"text": "Blue it is."},
        ],
    },
}
QUICK: dict[str, Any] = {
    "model": {"provider": "scripted", "name": "s", "script": [{"text": "ok"}]},
}


async def make_agent(client: httpx.AsyncClient, body: dict[str, Any]) -> str:
    """An agent of `body` (ASKER, QUICK, …), named uniquely: its id."""
    return str((await factories.make_agent(client, **body))["id"])


start = start_run


def _ids(html: str, prefix: str) -> list[str]:
    return re.findall(rf'id="{prefix}-([\w]+)"', html)


async def test_the_board_pages_newest_first_and_filters(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs_page, "BOARD_PAGE", 2)
    quick = await make_agent(client, QUICK)
    runs = [(await start(client, agent_id=quick))["id"] for _ in range(3)]
    for run_id in runs:
        await settle(client, run_id)

    # The board is the server's: it is read through the filter on this test's agent.
    first = await client.get("/ui/runs", params={"agent": quick})
    assert first.status_code == 200
    assert _ids(first.text, "run") == [runs[2], runs[1]]
    older = re.search(r'href="/ui/runs\?(agent=\w+&amp;before=[^"]+)" rel="next"', first.text)
    assert older, "a link to the older runs, with the filter"
    second = await client.get(f"/ui/runs?{older[1].replace('&amp;', '&')}")
    assert _ids(second.text, "run") == [runs[0]]
    assert 'rel="next"' not in second.text and "Newest runs" in second.text

    filtered = await client.get("/ui/runs", params={"status": "queued", "agent": quick})
    assert _ids(filtered.text, "run") == [] and "No runs match these filters yet." in filtered.text
    unknown = await client.get(
        "/ui/runs", params={"status": "nonsense", "lane": "", "agent": quick}
    )
    assert _ids(unknown.text, "run") == [runs[2], runs[1]]  # an unknown status: every run
    assert 'data-stream="/v1/runs/events?last_event_id=' in first.text


async def test_a_board_row_is_rendered_only_when_it_fits_the_filters(
    client: httpx.AsyncClient,
) -> None:
    run_id = (await start(client, agent_id=await make_agent(client, QUICK)))["id"]
    await settle(client, run_id)
    row = await client.get(f"/ui/runs/{run_id}/row", params={"status": "completed"})
    assert row.status_code == 200 and row.text.lstrip().startswith(f'<tr id="run-{run_id}"')
    assert (await client.get(f"/ui/runs/{run_id}/row?status=failed")).status_code == 204
    assert (await client.get(f"/ui/runs/{run_id}/row?lane=other")).status_code == 204
    assert (await client.get("/ui/runs/run_none/row")).status_code == 204


async def test_a_run_page_escapes_what_the_run_says_and_sets_its_headers(
    client: httpx.AsyncClient,
) -> None:
    run = await start(client, agent_id=await make_agent(client, ASKER), input="<script>x</script>")
    await settle(client, run["id"])
    page = await client.get(f"/ui/runs/{run['id']}")
    assert page.status_code == 200
    assert "<script>x</script>" not in page.text and "&lt;script&gt;x&lt;/script&gt;" in page.text
    assert "&lt;b&gt;Which&lt;/b&gt; colour?" in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert page.headers["cache-control"] == "no-store"
    # Every script and style the page names is served, none from elsewhere.
    assets = re.findall(r'(?:src|href)="(/ui/static/[^"]+)"', page.text)
    assert {a.split("?")[0].rsplit("/", 1)[1] for a in assets} >= {"app.js", "run.js", "app.css"}
    for asset in assets:
        assert (await client.get(asset)).status_code == 200, asset
    assert not re.search(r'(?:src|href)="https?://', page.text)


async def test_missing_runs_are_a_404_page_and_empty_fragments(client: httpx.AsyncClient) -> None:
    for path in ("/ui/runs/run_none", "/ui/runs/run_none/history"):
        missing = await client.get(path)
        assert missing.status_code == 404 and "There is no run run_none" in missing.text
    for fragment in ("summary", "messages"):
        assert (await client.get(f"/ui/runs/run_none/{fragment}")).status_code == 404


async def test_the_transcript_pages_in_windows_and_follows_by_position(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs_page, "TRANSCRIPT_WINDOW", 2)
    monkeypatch.setattr(runs_page, "TIMELINE_STEPS", 1)
    run = await start(client, agent_id=await make_agent(client, ASKER))
    assert (await settle(client, run["id"]))["status"] == "waiting_on_human"
    await client.post(f"/v1/runs/{run['id']}/human-response", json={"response": "blue"})
    assert (await settle(client, run["id"]))["status"] == "completed"  # messages 0 to 3

    page = await client.get(f"/ui/runs/{run['id']}")
    assert _ids(page.text, "msg") == ["2", "3"]
    assert 'data-before="2"' in page.text and "Earlier messages" in page.text
    assert "From step" in page.text  # the timeline replays the last step only
    earlier = await client.get(f"/ui/runs/{run['id']}/messages", params={"before": 2})
    assert _ids(earlier.text, "msg") == ["0", "1"]
    everything = await client.get(f"/ui/runs/{run['id']}/messages", params={"after": -1})
    assert _ids(everything.text, "msg") == ["0", "1", "2", "3"]  # a page that showed none
    later = await client.get(f"/ui/runs/{run['id']}/messages", params={"after": 1})
    assert _ids(later.text, "msg") == ["2", "3"]
    # The answer names its call's tool, read from the message before the window.
    assert "ask_human</span> answered" in later.text
    window = await client.get(f"/ui/runs/{run['id']}", params={"before": 2, "events": "start"})
    assert _ids(window.text, "msg") == ["0", "1"] and "Latest messages" in window.text
    assert "last_event_id=0" in window.text


async def test_the_history_page_pages_by_step(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs_page, "HISTORY_PAGE", 2)
    run = await start(client, agent_id=await make_agent(client, QUICK))
    await settle(client, run["id"])
    first = await client.get(f"/ui/runs/{run['id']}/history")
    assert _ids(first.text, "step") == ["1", "2"]
    nxt = re.search(r'history\?after=(\d+)" rel="next"', first.text)
    assert nxt and nxt[1] == "2"
    rest = await client.get(f"/ui/runs/{run['id']}/history", params={"after": 2})
    assert _ids(rest.text, "step")[0] == "3" and "First steps" in rest.text
    assert f"/ui/runs/{run['id']}?fork=3#fork" in rest.text


async def test_the_inbox_pages_and_its_items_leave_once_settled(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(approvals_page, "INBOX_PAGE", 1)
    # The inbox is the server's, oldest first: this test's page starts after every
    # approval made before it (ids sort by creation time).
    since = id_floor("apr", datetime.now(UTC))
    post = {"method": "POST", "url": "https://example.com/orders", "body": "{}"}
    script = [{"tool_calls": [{"name": "http_request", "input": post}]}, {"text": "no"}]
    poster = await make_agent(
        client,
        {
            "tools": ["http_request"],
            "model": {"provider": "scripted", "name": "s", "script": script},
        },
    )
    waiting = [await settle(client, (await start(client, agent_id=poster))["id"]) for _ in range(2)]
    approval_ids = [run["waiting_for"]["approval_id"] for run in waiting]

    first = await client.get("/ui/approvals", params={"after": since})
    assert _ids(first.text, "approval") == [approval_ids[0]]
    assert 'data-live-inserts="false"' in first.text
    second = await client.get(f"/ui/approvals?after={approval_ids[0]}")
    assert _ids(second.text, "approval") == [approval_ids[1]]
    assert "First page" in second.text

    item = await client.get(f"/ui/approvals/{approval_ids[0]}/item")
    assert item.status_code == 200 and "https://example.com/orders" in item.text
    await client.post(f"/v1/approvals/{approval_ids[0]}/reject", json={"reason": "no"})
    assert (await client.get(f"/ui/approvals/{approval_ids[0]}/item")).status_code == 204
    assert (await client.get("/ui/approvals/apr_none/item")).status_code == 204
