"""A worktree's page in a browser, under the `manual` merge order: "Merge now" on a queued
worktree merges it, and the page shows it merged without a reload; on the next, whose
merge breaks a call site the first changed, the page shows it held, with its semantic
issue, the approval's forms and its diff."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.workspaces.conftest import commit_file, make_repo, sh_git
from tests.workspaces.test_workspaces_api import (
    approve_review,
    task_for,
    until_status,
    workspace,
    write,
    writer,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_merge_now_merges_a_queued_worktree_and_a_held_one_shows_why(
    server: str, api: httpx.AsyncClient, page: Page, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    commit_file(repo, "util.py", "def parse(text):\n    return text.split()\n")
    await workspace(api, repo, merge_order="manual")
    changed = "def parse(text, sep):\n    return text.split(sep)\n"
    first = await task_for(api, writer("ann", write("util.py", changed)), "Separator")
    caller = "import util\n\nWORDS = util.parse('a b')\n"
    second = await task_for(api, writer("bob", write("words.py", caller)), "Words")
    await approve_review(api, first)
    await approve_review(api, second)
    ann = await until_status(api, first, "queued")
    bob = await until_status(api, second, "queued")

    await page.goto(f"{server}/ui/worktrees/{ann['id']}")
    await expect(page.locator(".stream-state")).to_have_text("Live.")
    await page.evaluate("window.notReloaded = true")
    await expect(page.locator(".diff .d-add")).to_have_text(
        ["+def parse(text, sep):", "+    return text.split(sep)"]
    )
    await page.get_by_role("button", name="Merge now").click()
    await expect(page.locator("h1 .status")).to_have_text("merged")
    await expect(page.locator(".merge-result h2 .status")).to_have_text("merged")
    await expect(page.locator(".merged-sha")).to_have_text(sh_git(repo, "rev-parse", "main")[:10])
    await expect(page.get_by_role("button", name="Merge now")).to_have_count(0)
    assert await page.evaluate("window.notReloaded") is True

    await page.goto(f"{server}/ui/worktrees/{bob['id']}")
    await expect(page.locator(".stream-state")).to_have_text("Live.")
    await page.evaluate("window.notReloaded = true")
    await page.get_by_role("button", name="Merge now").click()
    await expect(page.locator("h1 .status")).to_have_text("held")
    issue = page.locator("table.issues tbody tr")
    await expect(issue).to_have_count(1)
    await expect(issue.locator("td[data-label=Check]")).to_have_text("broken call")
    await expect(issue.locator("td[data-label=File]")).to_have_text("words.py")
    await expect(issue.locator("td[data-label=Line]")).to_have_text("3")
    await expect(page.locator(".escalation .question")).to_contain_text("despite 1 semantic issue?")
    await expect(page.get_by_role("button", name="Approve")).to_be_visible()
    await expect(page.locator(".diff .d-add").last).to_have_text("+WORDS = util.parse('a b')")
    await expect(page.locator("table.diff-stat td[data-label=File]")).to_have_text("words.py")
    assert await page.evaluate("window.notReloaded") is True
    assert sh_git(repo, "show", "main:util.py").startswith("def parse(text, sep)")
    assert "words.py" not in sh_git(repo, "ls-tree", "--name-only", "main")
