"""`GET /v1/conversations/{id}/journal` through real HTTP: every section of a new
conversation's journal is there and empty, what the agent wrote comes back as written, and
an unknown conversation is a 404 problem."""

from __future__ import annotations

import json

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.runs.schemas.journal import Journal, JournalEntry
from tests.support.api import assert_problem
from tests.support.factories import make_agent, settle, start_run


async def test_a_new_conversation_has_an_empty_journal(client: httpx.AsyncClient) -> None:
    run = await start_run(client, (await make_agent(client, {"text": "hi"}))["id"])
    await settle(client, run["id"])
    response = await client.get(f"/v1/conversations/{run['conversation_id']}/journal")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "conversation_id": run["conversation_id"],
        "objective": "",
        "current_state": "",
        "verified_findings": [],
        "decisions": [],
        "artifacts": [],
        "open_questions": [],
        "blockers": [],
        "handoff_next_action": "",
    }


async def test_the_journal_reads_back_as_the_agent_wrote_it(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    run = await start_run(client, (await make_agent(client, {"text": "hi"}))["id"])
    await settle(client, run["id"])
    written = Journal(
        objective="Migrate the billing tables",
        decisions=(
            JournalEntry(
                text="Copy, then swap",
                reasoning="no downtime",
                run_id=run["id"],
                tool_call_id="toolu_1",
            ),
        ),
        handoff_next_action="Verify the row counts",
    )
    async with db_engine.begin() as conn:  # as the journal tools store it
        await conn.execute(
            text("UPDATE conversations SET journal = CAST(:doc AS jsonb) WHERE id = :id"),
            {"doc": json.dumps(written.model_dump(mode="json")), "id": run["conversation_id"]},
        )
    body = (await client.get(f"/v1/conversations/{run['conversation_id']}/journal")).json()
    assert body["objective"] == "Migrate the billing tables"
    assert body["handoff_next_action"] == "Verify the row counts"
    assert body["decisions"] == [
        {
            "text": "Copy, then swap",
            "reasoning": "no downtime",
            "run_id": run["id"],
            "tool_call_id": "toolu_1",
        }
    ]


async def test_an_unknown_conversation_is_a_404_problem(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/conversations/nope/journal")
    body = assert_problem(response, 404, "not_found")
    assert (body["resource"], body["id"]) == ("conversation", "nope")
