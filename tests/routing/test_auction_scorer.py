"""An auction scored by a model: one call scores every bidder and the best score wins,
its cost is counted for the task; a call over the auction's budget, failing, or answering
something else leaves the bids to the capability score, and the reason says why."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from app.agents.schemas import AgentRead
from app.core.model_config import ModelConfig
from app.core.states import TaskStatus
from app.core.vocabulary import Complexity
from app.costs.schemas.costs import CostGroupBy
from app.costs.store import costs as cost_store
from app.llm.model_price import ModelPrice
from app.llm.prices import PriceTable
from app.llm.providers.scripted.provider import ScriptedProvider
from app.routing.engine.auction import capability_scores
from app.routing.engine.base import Candidate
from app.routing.engine.model_scorer import ModelScorer
from app.tasks.schemas.tasks import RouteRequest, TaskRead
from tests.routing.test_routing_api import agent, route
from tests.support.factories import create_task
from tests.support.server import make_settings, running_server

# Bob lacks the skill the capability score weighs, so it would pick Alice; the judge
# prefers Bob.
VERDICT = '{"alice": 20, "bob": 90}'
JUDGE = {"provider": "scripted", "name": "judge", "script": [{"text": VERDICT}]}


@pytest.fixture
async def judged(database_url: str, clean_db: AsyncEngine) -> AsyncIterator[str]:
    settings = make_settings(
        database_url,
        routing={"auction_scorer": JUDGE, "auction_max_usd": 1},
        costs={"prices": {"scripted/judge": {"input": 1, "output": 1}}},
    )
    async with running_server(settings) as url:
        yield url


async def test_the_scorer_s_best_bid_wins_and_its_call_is_counted(judged: str) -> None:
    async with httpx.AsyncClient(base_url=judged) as client:
        await agent(client, "alice", role="writer", skills=["release-notes"])
        bob = await agent(client, "bob", role="writer")
        task = await create_task(client, title="Write the release notes")
        answer = await route(client, task["id"], strategy="auction", role="writer")
        assert answer.status_code == 200, answer.text
        routed = answer.json()
        trail = (await client.get(f"/v1/tasks/{task['id']}/transitions")).json()
        params = {"group_by": "agent", "task_id": task["id"]}
        costs = (await client.get("/v1/costs", params=params)).json()

    assert routed["assigned_to"] == bob
    steps = trail["items"] if isinstance(trail, dict) else trail
    [assigned] = [step for step in steps if step["to_status"] == "assigned"]
    assert "scored by judge" in assigned["reason"] and "highest bid 0.900" in assigned["reason"]
    # The scoring call counts for the task (beside Bob's run of it, once assigned).
    router = next(line for line in costs["items"] if line["key"] == "router")
    assert router["calls"] == 1 and router["cost_usd"] > 0


def _candidate(name: str, skills: list[str]) -> Candidate:
    agent = AgentRead.model_validate(
        {
            "id": f"agent_{name}",
            "name": name,
            "role": "writer",
            "skills": skills,
            "model": {"provider": "scripted", "name": "s", "script": [{"text": "x"}]},
            "version": 1,
            "created_at": datetime.now(UTC),
            "updated_at": datetime.now(UTC),
        }
    )
    return Candidate(agent, held=0)


BIDDERS = [_candidate("alice", ["release-notes"]), _candidate("bob", [])]
REQUEST = RouteRequest(strategy="auction", role="writer", skills=["release-notes"])


def _task() -> TaskRead:
    """What the scorer reads of a task (the rest is the store's business)."""
    now = datetime.now(UTC)
    return TaskRead.model_construct(
        id="task_x",
        title="Write the release notes",
        description="For 2.0.",
        estimated_complexity=Complexity.MEDIUM,
        acceptance_criteria=["lists every change"],
        created_by="tester",
        status=TaskStatus.CREATED,
        retry_count=0,
        version=1,
        created_at=now,
        updated_at=now,
    )


def _scorer(answer: dict[str, Any], clean_db: AsyncEngine, **fields: Any) -> ModelScorer:
    model = ModelConfig.model_validate(
        {"provider": "scripted", "name": "judge", "script": [answer]}
    )
    prices = PriceTable({"scripted/judge": ModelPrice.of("1", "1")})
    return ModelScorer(
        model,
        lambda owner, _run: ScriptedProvider(owner.model.script or []),
        prices,
        async_sessionmaker(clean_db),
        max_usd=fields.get("max_usd", 1.0),
    )


@pytest.mark.parametrize(
    ("answer", "max_usd", "why"),
    [
        ({"text": VERDICT}, 0.000_000_1, "over its budget"),
        ({"text": "Bob, clearly."}, 1.0, "not a JSON object of scores"),
        ({"text": '{"bob": 90}'}, 1.0, "did not score every bidder"),
        ({"text": "x", "fault": {"status": 529, "message": "overloaded"}}, 1.0, "scorer failed"),
    ],
)
async def test_without_a_usable_answer_the_bids_are_capability_scores(
    clean_db: AsyncEngine, answer: dict[str, Any], max_usd: float, why: str
) -> None:
    scores = await _scorer(answer, clean_db, max_usd=max_usd).score(_task(), BIDDERS, REQUEST)
    assert scores.by_agent == capability_scores(_task(), BIDDERS, REQUEST).by_agent
    assert scores.how.startswith("capability score: ") and why in scores.how


async def test_a_usable_answer_is_each_bidder_s_score(clean_db: AsyncEngine) -> None:
    scores = await _scorer({"text": f"Here: {VERDICT}"}, clean_db).score(_task(), BIDDERS, REQUEST)
    assert scores.by_agent == {"agent_alice": 0.2, "agent_bob": 0.9}
    async with async_sessionmaker(clean_db)() as session:
        today = datetime.now(UTC).date()
        [line] = await cost_store.totals(session, CostGroupBy.AGENT, start=today, end=today)
    assert line.key == "router" and line.calls == 1
