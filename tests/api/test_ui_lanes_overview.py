"""The lanes pages and the overview as HTML over HTTP (tests/ui drives them live): a
lane's holder and queue in claim order, delayed runs, paging, the fragments' answers when
a lane is idle, escaping; the overview's counts, breakers, failures and approvals."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.breakers import BreakerState
from app.ui import lanes as lanes_page
from app.ui import overview as overview_page
from tests.api.test_runs_api import make_agent, settle, start
from tests.api.test_ui_pages import ASKER, QUICK
from tests.support.server import make_settings, running_app

pytestmark = pytest.mark.own_server  # SHARED-TODO: names, projects or lists shared with other tests

BROKEN = {"name": "broken", "model": {"provider": "anthropic", "name": "claude-x"}}
POSTER = {
    "name": "poster",
    "tools": ["http_request"],
    "model": {
        "provider": "scripted",
        "name": "s",
        "script": [
            {
                "tool_calls": [
                    {
                        "name": "http_request",
                        "input": {"method": "POST", "url": "https://example.com/x", "body": "{}"},
                    }
                ]
            },
            {"text": "no"},
        ],
    },
}


def _runs(html: str) -> list[str]:
    """The runs a lane card lists, holder first."""
    return re.findall(r'<tr class="(?:holder|queued)" data-run="(\w+)"', html)


def _lanes(html: str) -> list[str]:
    return re.findall(r'<article class="lane" data-lane="([^"]*)"', html)


async def _held_lane(client: httpx.AsyncClient, lane: str, queued: int) -> list[str]:
    """A lane held by a run waiting on a person, with `queued` runs behind it."""
    asker = await make_agent(client, ASKER)
    holder = (await start(client, agent_id=asker, lane=lane))["id"]
    assert (await settle(client, holder))["status"] == "waiting_on_human"
    return [holder] + [
        (await start(client, agent_id=asker, lane=lane))["id"] for _ in range(queued)
    ]


async def test_the_lanes_show_holders_and_queues_in_claim_order_and_page(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lanes_page, "LANES_PAGE", 1)
    monkeypatch.setattr(lanes_page, "QUEUE_PREVIEW", 1)
    empty = await client.get("/ui/lanes")
    assert empty.status_code == 200 and "No run holds or waits on a lane." in empty.text
    team = await _held_lane(client, "team/<b>a</b>", queued=2)
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    quick = await make_agent(client, QUICK)
    delayed = (await start(client, agent_id=quick, lane="nightly", not_before=later))["id"]

    first = await client.get("/ui/lanes")
    assert _lanes(first.text) == ["team/&lt;b&gt;a&lt;/b&gt;"] and "<b>a</b>" not in first.text
    assert _runs(first.text) == team[:2]  # the holder, then the head of the queue
    assert "2 queued" in first.text and "1 more queued" in first.text
    assert 'href="/ui/lanes/team/%3Cb%3Ea%3C/b%3E"' in first.text
    assert 'data-stream="/v1/runs/events?last_event_id=' in first.text
    more = re.search(r'href="/ui/lanes\?after=(\w+)" rel="next"', first.text)
    assert more and more[1] == team[0]

    second = await client.get(f"/ui/lanes?after={more[1]}")
    assert _lanes(second.text) == ["nightly"] and _runs(second.text) == [delayed]
    assert "No run holds the lane now" in second.text and "1 delayed" in second.text
    assert 'data-last-page="true"' in second.text and "First page" in second.text
    assert re.search(r'<span class="delayed"><time datetime="[^"]+">', second.text)


async def test_a_lane_page_has_its_whole_queue_and_follows_its_own_stream(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lanes_page, "QUEUE_SHOWN", 2)
    monkeypatch.setattr(lanes_page, "QUEUE_PREVIEW", 1)
    team = await _held_lane(client, "team/alpha", queued=3)

    page = await client.get("/ui/lanes/team/alpha")
    assert page.status_code == 200 and _runs(page.text) == team[:3]
    assert 'data-stream="/v1/lanes/team%2Falpha/events?last_event_id=' in page.text
    assert 'href="/ui/runs?lane=team%2Falpha&amp;status=queued">1 more queued' in page.text
    assert 'href="/ui/runs?lane=team%2Falpha">Every run on this lane' in page.text

    card = await client.get("/ui/lane-card", params={"lane": "team/alpha"})
    assert card.status_code == 200 and _runs(card.text) == team[:2]  # the list's preview
    full = await client.get("/ui/lane-card", params={"lane": "team/alpha", "full": "true"})
    assert _runs(full.text) == team[:3]

    idle = await client.get("/ui/lanes/nothing-here")
    assert idle.status_code == 200 and _lanes(idle.text) == []
    assert "No run holds or waits on this lane now." in idle.text
    assert (await client.get("/ui/lane-card", params={"lane": "nothing-here"})).status_code == 204
    assert (await client.get("/ui/lane-card")).status_code == 422


async def test_the_overview_counts_runs_and_lists_failures_and_approvals(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(overview_page, "RECENT_FAILURES", 1)
    nothing = await client.get("/ui/overview")
    assert nothing.status_code == 200 and "No run has failed." in nothing.text
    assert re.search(r'<dd data-figure="waited">—</dd>', nothing.text)
    broken = await make_agent(client, BROKEN)
    failed = [(await settle(client, (await start(client, agent_id=broken))["id"])) for _ in "ab"]
    assert {run["status"] for run in failed} == {"failed"}
    await _held_lane(client, "busy", queued=1)
    await settle(client, (await start(client, agent_id=await make_agent(client, POSTER)))["id"])

    page = await client.get("/ui/overview")
    assert re.search(r'<tr data-status="failed">.*?<td class="num count">2</td>', page.text, re.S)
    assert re.search(
        r'<tr data-status="waiting_on_human">.*?count">2</td>.*?width="100"', page.text, re.S
    )
    assert re.search(r'<tr data-status="queued">.*?count">1</td>.*?width="50"', page.text, re.S)
    assert 'href="/ui/runs?status=failed"' in page.text
    assert _failures(page.text) == [failed[1]["id"]]  # the last to fail, one shown here
    assert failed[1]["stop_reason"] in page.text
    assert re.search(r'<dd data-figure="approvals"><a href="/ui/approvals">1</a>', page.text)
    assert re.search(r'<dd data-figure="waited">\d+ s', page.text)
    assert 'data-stream="/v1/runs/events?last_event_id=' in page.text
    live = await client.get("/ui/overview/live")
    assert live.text.lstrip().startswith('<div class="figures" id="figures">')


def _failures(html: str) -> list[str]:
    table = html.split('<table class="failures">', 1)[1]
    return re.findall(r'<tr data-run="(\w+)">', table)


async def test_the_overview_shows_this_process_breakers(
    database_url: str, clean_db: AsyncEngine
) -> None:
    async with running_app(make_settings(database_url)) as (url, app):
        breakers = app.state.services.breakers
        for failed in (True, True, True, True, True):
            breakers.get("tool:down").record(failed=failed)
        breakers.get("tool:fine").record(failed=True)
        breakers.get("tool:fine").record(failed=False)
        breakers.get("provider:x:y").state = BreakerState.HALF_OPEN
        async with httpx.AsyncClient(base_url=url) as client:
            page = (await client.get("/ui/overview")).text
    rows = dict(re.findall(r'<tr data-breaker="([^"]+)">(.*?)</tr>', page, re.S))
    assert list(rows) == ["provider:x:y", "tool:down", "tool:fine"]
    assert "breaker-open" in rows["tool:down"] and "probe call through in" in rows["tool:down"]
    assert (
        "1 of its last 2 calls failed (it opens at 50 % failed, from 5 calls on)"
        in rows["tool:fine"]
    )
    assert "a probe call is out" in rows["provider:x:y"]


def test_a_wait_reads_in_its_two_largest_units() -> None:
    assert overview_page._duration(-1) == "0 s"
    assert overview_page._duration(59.9) == "59 s"
    assert overview_page._duration(125) == "2 min"
    assert overview_page._duration(3 * 3600 + 7 * 60) == "3 h 7 min"
    assert overview_page._duration(2 * 86400 + 5 * 3600 + 1) == "2 d 5 h"
