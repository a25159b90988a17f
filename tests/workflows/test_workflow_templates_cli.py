"""`loopwright workflows templates` and `loopwright workflows instantiate`, run as a person
runs them against a real server: the templates with their variables, a definition made
with variables whose id is printed alone, its board and sprint, and the refusals' exits."""

from __future__ import annotations

import httpx

from tests.support.cli import cli
from tests.support.factories import project
from tests.tasks.test_boards_api import board, column


async def test_templates_lists_each_template_with_its_variables(base_url: str) -> None:
    listed = await cli(base_url, "workflows", "templates")
    assert listed.code == 0, listed
    blocks = listed.out.split("\n\n")
    assert [b.splitlines()[0] for b in blocks] == [
        "sequential  (sequential)",
        "parallel  (parallel)",
        "kanban  (kanban)",
        "agile_kanban  (agile_kanban)",
    ]
    agile = blocks[3].splitlines()
    assert "  --var sprint_length=14  int, 1 to 90" in agile
    assert "      A sprint's length in days, its first and last day included." in agile
    assert "  --var feature=the feature  string, up to 120 characters" in blocks[0]


async def test_instantiate_prints_the_definition_id_and_sets_up_the_board(
    client: httpx.AsyncClient, base_url: str
) -> None:
    atlas = project()
    made = await cli(
        base_url,
        "workflows",
        "instantiate",
        "agile_kanban",
        "--name",
        "Atlas sprints",
        "--project",
        atlas,
        "--var",
        "sprint_length=10",
        "--var",
        "wip_limit=2",
    )
    assert made.code == 0, made
    workflow_id = made.out.strip()
    assert workflow_id.startswith("wf_") and "\n" not in workflow_id
    workflow = (await client.get(f"/v1/workflows/{workflow_id}")).json()
    assert (workflow["name"], workflow["kind"], workflow["project"]) == (
        "Atlas sprints",
        "agile_kanban",
        atlas,
    )
    assert column(await board(client, atlas), "in_progress")["wip_limit"]["limit"] == 2
    [sprint] = (await client.get("/v1/sprints", params={"project": atlas})).json()["items"]
    assert sprint["duration_days"] == 10

    listed = await cli(base_url, "workflows")
    assert listed.code == 0, listed
    assert listed.out.splitlines()[0].split() == ["WORKFLOW", "KIND", "PROJECT", "VERSION", "NAME"]
    # Every definition on the server is listed: the test's own is its row.
    [row] = [line for line in listed.out.splitlines()[1:] if line.startswith(workflow_id)]
    assert row.split() == [workflow_id, "agile_kanban", atlas, "1", "Atlas", "sprints"]

    # A string variable takes digits as text.
    named = await cli(base_url, "workflows", "instantiate", "sequential", "--var", "feature=2026")
    assert named.code == 0, named
    sequential = (await client.get(f"/v1/workflows/{named.out.strip()}")).json()
    assert sequential["name"] == "Deliver 2026"


async def test_instantiate_refusals_exit_as_the_others_do(base_url: str) -> None:
    bounds = await cli(base_url, "workflows", "instantiate", "kanban", "--var", "wip_limit=0")
    assert bounds.code == 6, bounds
    assert "422 validation_error" in bounds.err and "variables.wip_limit" in bounds.err
    text = await cli(base_url, "workflows", "instantiate", "kanban", "--var", "wip_limit=two")
    assert text.code == 6 and "variables.wip_limit: must be an integer" in text.err
    unknown = await cli(base_url, "workflows", "instantiate", "waterfall")
    assert unknown.code == 6 and "404 not_found" in unknown.err
    for wrong in (
        ["instantiate"],
        ["instantiate", "kanban", "--var", "wip_limit"],
        ["--var", "a=1"],
    ):
        refused = await cli(base_url, "workflows", *wrong)
        assert refused.code == 2, refused
