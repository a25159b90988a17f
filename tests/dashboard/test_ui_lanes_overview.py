"""The lanes pages and the overview as HTML over HTTP (tests/ui drives them live): a
lane's holder and queue in claim order, delayed runs, paging, the fragments' answers when
a lane is idle, escaping; the overview's counts, breakers, failures and approvals."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.breakers import BreakerState
from app.core.ids import id_floor
from app.dashboard import overview as overview_page
from app.runs.ui import lanes as lanes_page
from tests.dashboard.test_ui_pages import ASKER, QUICK, make_agent
from tests.support.factories import settle, start_run, unique
from tests.support.server import make_settings, running_app, running_server

# Agent bodies without a name (`make_agent` gives each a unique one).
BROKEN = {"model": {"provider": "anthropic", "name": "claude-x"}}
POSTER = {
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
    holder = (await start_run(client, agent_id=asker, lane=lane))["id"]
    assert (await settle(client, holder))["status"] == "waiting_on_human"
    return [holder] + [
        (await start_run(client, agent_id=asker, lane=lane))["id"] for _ in range(queued)
    ]


async def test_the_lanes_show_holders_and_queues_in_claim_order_and_page(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lanes_page, "LANES_PAGE", 1)
    monkeypatch.setattr(lanes_page, "QUEUE_PREVIEW", 1)
    # The server's lanes are listed by their oldest run (ids sort by creation time): this
    # test's are those after every run made before it.
    since = id_floor("run", datetime.now(UTC))
    empty = await client.get("/ui/lanes", params={"after": since})
    assert empty.status_code == 200 and "No run holds or waits on a lane." in empty.text
    suffix = unique("")
    team = await _held_lane(client, f"team/<b>a</b>{suffix}", queued=2)
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    quick = await make_agent(client, QUICK)
    nightly = unique("nightly")
    delayed = (await start_run(client, agent_id=quick, lane=nightly, not_before=later))["id"]

    first = await client.get("/ui/lanes", params={"after": since})
    assert _lanes(first.text) == [f"team/&lt;b&gt;a&lt;/b&gt;{suffix}"]
    assert "<b>a</b>" not in first.text
    assert _runs(first.text) == team[:2]  # the holder, then the head of the queue
    assert "2 queued" in first.text and "1 more queued" in first.text
    assert f'href="/ui/lanes/team/%3Cb%3Ea%3C/b%3E{suffix}"' in first.text
    assert 'data-stream="/v1/runs/events?last_event_id=' in first.text
    more = re.search(r'href="/ui/lanes\?after=(\w+)" rel="next"', first.text)
    assert more and more[1] == team[0]

    second = await client.get(f"/ui/lanes?after={more[1]}")
    assert _lanes(second.text) == [nightly] and _runs(second.text) == [delayed]
    assert "No run holds the lane now" in second.text and "1 delayed" in second.text
    assert 'data-last-page="true"' in second.text and "First page" in second.text
    assert re.search(r'<span class="delayed"><time datetime="[^"]+">', second.text)


async def test_a_lane_page_has_its_whole_queue_and_follows_its_own_stream(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lanes_page, "QUEUE_SHOWN", 2)
    monkeypatch.setattr(lanes_page, "QUEUE_PREVIEW", 1)
    lane = unique("team/alpha")
    team = await _held_lane(client, lane, queued=3)
    encoded = quote(lane, safe="")

    page = await client.get(f"/ui/lanes/{lane}")
    assert page.status_code == 200 and _runs(page.text) == team[:3]
    assert f'data-stream="/v1/lanes/{encoded}/events?last_event_id=' in page.text
    assert f'href="/ui/runs?lane={encoded}&amp;status=queued">1 more queued' in page.text
    assert f'href="/ui/runs?lane={encoded}">Every run on this lane' in page.text

    card = await client.get("/ui/lane-card", params={"lane": lane})
    assert card.status_code == 200 and _runs(card.text) == team[:2]  # the list's preview
    full = await client.get("/ui/lane-card", params={"lane": lane, "full": "true"})
    assert _runs(full.text) == team[:3]

    idle_lane = unique("nothing-here")
    idle = await client.get(f"/ui/lanes/{idle_lane}")
    assert idle.status_code == 200 and _lanes(idle.text) == []
    assert "No run holds or waits on this lane now." in idle.text
    assert (await client.get("/ui/lane-card", params={"lane": idle_lane})).status_code == 204
    assert (await client.get("/ui/lane-card")).status_code == 422


async def test_the_overview_counts_runs_and_lists_failures_and_approvals(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(overview_page, "RECENT_FAILURES", 1)
    # The server's figures count other tests' runs too: this test's are the differences.
    before = (await client.get("/ui/overview")).text
    broken = await make_agent(client, BROKEN)
    failed = [
        (await settle(client, (await start_run(client, agent_id=broken))["id"])) for _ in "ab"
    ]
    assert {run["status"] for run in failed} == {"failed"}
    await _held_lane(client, unique("busy"), queued=1)
    await settle(client, (await start_run(client, agent_id=await make_agent(client, POSTER)))["id"])

    page = await client.get("/ui/overview")
    grown = {
        status: _bars(page.text)[status][0] - _bars(before)[status][0]
        for status in ("failed", "waiting_on_human", "queued")
    }
    assert grown == {"failed": 2, "waiting_on_human": 2, "queued": 1}
    # Each bar is its count's share of the largest.
    bars = _bars(page.text)
    largest = max(count for count, _ in bars.values())
    assert {s: width for s, (_, width) in bars.items()} == {
        s: round(100 * count / largest) for s, (count, _) in bars.items()
    }
    assert 'href="/ui/runs?status=failed"' in page.text
    assert _failures(page.text) == [failed[1]["id"]]  # the last to fail, one shown here
    assert failed[1]["stop_reason"] in page.text
    assert _approvals(page.text) - _approvals(before) == 1
    assert re.search(r'<dd data-figure="waited">\d+ s', page.text)
    assert 'data-stream="/v1/runs/events?last_event_id=' in page.text
    live = await client.get("/ui/overview/live")
    assert live.text.lstrip().startswith('<div class="figures" id="figures">')


def _bars(html: str) -> dict[str, tuple[int, int]]:
    """Each status's row of the overview: (count, bar width)."""
    rows = re.findall(r'<tr data-status="(\w+)">.*?count">(\d+)</td>.*?width="(\d+)"', html, re.S)
    return {status: (int(count), int(width)) for status, count, width in rows}


def _approvals(html: str) -> int:
    found = re.search(r'<dd data-figure="approvals"><a href="/ui/approvals">(\d+)</a>', html)
    assert found, "the pending approvals' figure"
    return int(found[1])


async def test_an_empty_service_s_overview_says_so(
    database_url: str, clean_db: AsyncEngine
) -> None:
    """What the overview says with no run at all: a server of its own on the emptied
    private database (the shared one is never empty)."""
    async with (
        running_server(make_settings(database_url)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        nothing = await client.get("/ui/overview")
    assert nothing.status_code == 200 and "No run has failed." in nothing.text
    assert re.search(r'<dd data-figure="waited">—</dd>', nothing.text)


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
