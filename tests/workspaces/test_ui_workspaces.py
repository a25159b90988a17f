"""The workspace pages as HTML over HTTP, on real repositories (tests/ui/test_worktree_page.py
drives a worktree's page in a browser): the workspaces with their settings and worktrees in
use; the worktrees by project and status; a worktree's page with its diff (lines coloured
by class), its held merge's semantic issues and the forms to decide its escalation, a
conflict's marked hunks, "Merge now" for a queued one, a merged one's diff; the task page's
worktree, the inbox's merge approvals; live fragments, streams, 404s and escaping. On the
shared server each test's workspace is its own project's, and it reads the rows of its own."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.events import ui as events
from tests.sprints.test_ui_sprints import _rows
from tests.support.factories import project
from tests.workspaces.conftest import commit_file, make_repo, sh_git
from tests.workspaces.test_workspaces_api import (
    approve_review,
    conflicting_edits,
    task_for,
    until_status,
    workspace,
    write,
    writer,
)
from tests.workspaces.test_worktree_diff_api import committed


def _attribute(html: str, name: str) -> str:
    found = re.search(rf"{name}='([^']*)'", html) or re.search(rf'{name}="([^"]*)"', html)
    assert found, f"no {name} on the page"
    return found[1]


def _spans(html: str, kind: str) -> list[str]:
    """The text of a diff's lines of one class."""
    return re.findall(rf'<span class="{kind}">(.*?)\n</span>', html)


async def inbox_with(client: httpx.AsyncClient, approval_id: str) -> str:
    """The inbox's page that lists the approval (following its "More" links: the pending
    approvals of other tests come first)."""
    url = "/ui/approvals"
    while True:
        html = (await client.get(url)).text
        if f'id="approval-{approval_id}"' in html:
            return html
        more = re.search(r'<a href="(/ui/approvals\?after=[^"]+)" rel="next">', html)
        assert more, f"approval {approval_id} is not in the inbox"
        url = more[1]


async def held_merge(client: httpx.AsyncClient, repo: Path, own: str) -> tuple[str, dict[str, Any]]:
    """A task of the project `own` whose merge breaks a call site another task's merge
    changed: held, with a person's approval asked for. Its task id and worktree."""
    commit_file(repo, "util.py", "def parse(text):\n    return text.split()\n")
    await workspace(client, repo, project=own)
    changed = "def parse(text, sep):\n    return text.split(sep)\n"
    first = await task_for(
        client, writer("ann", write("util.py", changed)), "Separator", project=own
    )
    caller = "import util\n\nWORDS = util.parse('a b')\n"
    second = await task_for(client, writer("bob", write("words.py", caller)), "Words", project=own)
    await approve_review(client, first)
    await until_status(client, first, "merged")
    await approve_review(client, second)
    return second, await until_status(client, second, "held")


async def test_a_held_merge_shows_its_issues_diff_and_the_decision(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    own = project()
    task_id, held = await held_merge(client, make_repo(tmp_path / "repo"), own)
    page = await client.get(f"/ui/worktrees/{held['id']}")
    assert page.status_code == 200
    html = page.text
    assert 'aria-current="page">Workspaces</a>' in html
    assert f'<h1>Worktree <code>{held["id"]}</code> <span class="status status-held">' in html
    assert f'<a href="/ui/tasks/{task_id}">Words</a>' in html
    assert f'<code class="branch">loopwright/{task_id}</code>' in html

    assert 'data-outcome="semantic_issues"' in html
    [issue] = _rows(html, "issues")
    assert issue[:4] == ["broken call", "words.py", "3", "util.parse"]
    assert held["merge"]["issues"][0]["message"] in issue[4]
    # Its escalation: the approval's question and the forms that decide it, here.
    approval = held["approval_id"]
    assert f'<form data-api="/v1/approvals/{approval}/approve"' in html
    assert f'href="/ui/approvals#approval-{approval}"' in html
    assert "1 semantic issue? Approve to merge it as it is" in html

    # The diff: its stat, then its lines, each with its class.
    assert _rows(html, "diff-stat") == [["words.py", "+3", "\N{MINUS SIGN}0"]]
    assert _spans(html, "d-file")[0] == "diff --git a/words.py b/words.py"
    assert _spans(html, "d-hunk") == ["@@ -0,0 +1,3 @@"]
    assert _spans(html, "d-add") == ["+import util", "+", "+WORDS = util.parse(&#39;a b&#39;)"]
    assert "Merge now" not in html  # only a queued one

    stream = _attribute(html, "data-stream")
    assert re.fullmatch(r"/v1/worktrees/events\?last_event_id=\d+", stream)
    assert json.loads(_attribute(html, "data-events")) == events.WORKTREES
    assert set(events.WORKTREES) == {
        "worktree.created",
        "worktree.committed",
        "worktree.transitioned",
        "worktree.removed",
    }
    live = await client.get(f"/ui/worktrees/{held['id']}/live")
    assert live.status_code == 200 and live.text.lstrip().startswith("<h1>Worktree")
    assert "<html" not in live.text and 'class="issues"' in live.text

    # The list, by status; the task's page; the inbox links the merge's worktree.
    listed = await client.get("/ui/worktrees", params={"status": "held", "project": own})
    [row] = _rows(listed.text, "worktrees")
    assert row[:5] == [held["id"], "Words", own, f"loopwright/{task_id}", "held escalated"]
    assert row[5].split() == ["+3", "\N{MINUS SIGN}0", "1", "file"]
    assert (
        _attribute(listed.text, "data-live") == f"/ui/worktrees/rows?project={own}&amp;status=held"
    )
    rows = await client.get("/ui/worktrees/rows", params={"status": "merged", "project": own})
    assert [r[1] for r in _rows(rows.text, "worktrees")] == ["Separator"]
    none = await client.get("/ui/worktrees", params={"status": "rejected", "project": own})
    assert "No worktree matches." in none.text
    task_page = (await client.get(f"/ui/tasks/{task_id}")).text
    assert (
        f'<a href="/ui/worktrees/{held["id"]}"><code>loopwright/{task_id}</code></a>' in task_page
    )
    inbox = await inbox_with(client, approval)
    assert f'<a class="worktree-link" href="/ui/worktrees/{held["id"]}">' in inbox
    item = (await client.get(f"/ui/approvals/{approval}/item")).text
    assert f'href="/ui/worktrees/{held["id"]}"' in item and f'href="/ui/tasks/{task_id}"' in item


async def test_a_conflict_shows_its_marked_hunks_escaped(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    own = project()
    await workspace(client, repo, project=own)
    _, conflict = await conflicting_edits(
        client, repo, "<b>ann</b>", "<script>bob</script>", project=own
    )

    html = (await client.get(f"/ui/worktrees/{conflict['id']}")).text
    assert "<script>bob" not in html and "<b>ann" not in html
    assert 'data-outcome="conflict"' in html and "<h4><code>a.txt</code></h4>" in html
    markers = [unescape(m)[:7] for m in _spans(html, "c-marker")]
    assert markers == ["<<<<<<<", "|||||||", "=======", ">>>>>>>"]
    assert _spans(html, "c-base") == ["&lt;b&gt;ann&lt;/b&gt;"]
    assert _spans(html, "c-ancestor") == ["a.txt line 1"]
    assert _spans(html, "c-task") == ["&lt;script&gt;bob&lt;/script&gt;"]
    # Its branch was laid again on main: the diff is its work as it was committed.
    assert "+&lt;script&gt;bob&lt;/script&gt;" in _spans(html, "d-add")
    assert "Its work as committed before the merge conflicted" in html
    diff = (await client.get(f"/v1/worktrees/{conflict['id']}/diff")).json()
    assert (diff["source"], diff["head"]) == ("before_conflict", conflict["head_sha"])
    assert conflict["merge"]["detail"] in html.replace("&#39;", "'")


async def test_a_queued_worktree_can_be_merged_now_and_then_shows_its_merge(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    own = project()
    await workspace(client, repo, project=own, merge_order="manual", cleanup_after_merge=False)
    task_id = await task_for(
        client, writer("ann", write("new.txt", "new\n")), "New file", project=own
    )
    await approve_review(client, task_id)
    queued = await until_status(client, task_id, "queued")
    html = (await client.get(f"/ui/worktrees/{queued['id']}")).text
    assert f'<form class="merge-now actions" data-api="/v1/worktrees/{queued["id"]}/merge">' in html
    assert "This workspace merges when a person asks." in html
    assert "Last merge" not in html

    merged = await client.post(f"/v1/worktrees/{queued['id']}/merge")
    assert merged.status_code == 200 and merged.json()["status"] == "merged"
    html = (await client.get(f"/ui/worktrees/{queued['id']}/live")).text
    assert "Merge now" not in html and 'data-outcome="merged"' in html
    sha = sh_git(repo, "rev-parse", "main")
    assert f'<code class="merged-sha" title="{sha}">{sha[:10]}</code>' in html
    assert "What its merge brought to <code>main</code>." in html
    assert _spans(html, "d-add") == ["+new"]


@pytest.mark.own_server  # the page lists every project's workspaces: empty on no server but its own
async def test_the_workspaces_page_says_when_there_is_none(client: httpx.AsyncClient) -> None:
    empty = await client.get("/ui/workspaces")
    assert empty.status_code == 200 and "No workspace yet" in empty.text
    assert '<a href="/ui/workspaces" aria-current="page">Workspaces</a>' in empty.text


async def test_the_workspaces_page_and_what_is_missing(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    own = project()
    await workspace(client, repo, project=own, commands=["pytest", "ruff"], max_worktrees=3)
    task_id = await task_for(client, writer("ann", write("x.txt", "x\n")), "X", project=own)
    worktree = await committed(client, task_id)

    html = (await client.get("/ui/workspaces")).text
    assert '<a href="/ui/workspaces" aria-current="page">Workspaces</a>' in html
    [row] = [r for r in _rows(html, "workspaces") if r[0] == own]
    assert row[:6] == [own, str(repo), "main", "completion", "a person", "1 / 3"]
    assert row[6] == "semantic checks; cleanup after merge" and row[7] == "pytestruff"
    assert f'<a href="/ui/worktrees?project={own}">{own}</a>' in html
    assert _attribute(html, "data-live") == "/ui/workspaces/table"
    assert json.loads(_attribute(html, "data-events")) == events.WORKTREES
    table = await client.get("/ui/workspaces/table")
    assert "<html" not in table.text
    assert [r for r in _rows(table.text, "workspaces") if r[0] == own] == [row]

    missing = await client.get("/ui/worktrees/wt_nope")
    assert missing.status_code == 404 and "There is no worktree wt_nope." in missing.text
    assert (await client.get("/ui/worktrees/wt_nope/live")).status_code == 404
    # Its branch deleted by hand: the page says so where the diff would be.
    sh_git(repo, "worktree", "remove", "--force", worktree["path"])
    sh_git(repo, "branch", "-D", worktree["branch"])
    html = (await client.get(f"/ui/worktrees/{worktree['id']}")).text
    assert re.search(r'<p class="error-box diff-problem">[^<]*is no longer in', html)
