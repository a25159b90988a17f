"""Workspaces from the command line: `loopwright workspace PROJECT` shows, sets (any
option: only what is given changes) or removes (`--remove`) a project's workspace;
`loopwright worktrees [list|show|diff|merge]` lists its tasks' worktrees, shows one (its
diff stat and last merge), prints its diff, or merges a queued one now. A refusal is the
server's problem on one line, exit 6."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from app.client.arguments import count
from app.client.commands import Commands, add_verb
from app.client.exits import Exit
from app.client.http import Client, ClientError, all_pages, segment
from app.client.output import one_line, print_table
from app.core.vocabulary import ConflictEscalation, MergeOrder, WorktreeStatus

DIFF_LIMIT_BYTES = 4 * 1024 * 1024  # the most the server sends of a diff's text
HUNK_LINES = 40  # lines of a conflict hunk `worktrees show` prints

# The options that set a workspace, by the field each sets.
_SETTINGS = {
    "repo": "repository",
    "base": "base_branch",
    "max": "max_worktrees",
    "order": "merge_order",
    "escalation": "escalation",
    "review_agent": "review_agent_id",
    "commands": "commands",
    "cleanup": "cleanup_after_merge",
    "semantic_checks": "semantic_checks",
}
# What `PUT` takes: a workspace as read, less what the server keeps.
_WRITABLE = (
    "repository",
    "base_branch",
    "max_worktrees",
    "merge_order",
    "escalation",
    "review_agent_id",
    "cleanup_after_merge",
    "commands",
    "command_timeout_s",
    "output_limit_bytes",
    "semantic_checks",
)


# -- workspace ---------------------------------------------------------------------------


def workspace(args: argparse.Namespace, client: Client) -> Exit:
    """Show it; with options, set them first (a new workspace needs `--repo`; an existing
    one keeps what is not given, written only if nobody changed it since it was read);
    with `--remove`, remove it."""
    path = f"/v1/projects/{segment(args.project)}/workspace"
    given = {field: getattr(args, option) for option, field in _SETTINGS.items()}
    given = {field: value for field, value in given.items() if value is not None}
    if "repository" in given:  # the server wants it absolute; a relative one is from here
        given["repository"] = os.path.abspath(given["repository"])
    if args.remove:
        if given:
            raise ClientError("--remove takes no other option", Exit.USAGE)
        client.delete(path)
        print(f"workspace {args.project} removed (its repository and branches are left)")
        return Exit.COMPLETED
    current = _current(client, args.project)
    if not given:
        if current is None:
            raise ClientError(
                f"project {args.project!r} has no workspace "
                f"(loopwright workspace {args.project} --repo PATH)"
            )
        print_workspace(current)
        return Exit.COMPLETED
    if current is None and "repository" not in given:
        raise ClientError("--repo PATH is needed to make a workspace", Exit.USAGE)
    body = {k: v for k, v in (current or {}).items() if k in _WRITABLE} | given
    headers = {"If-Match": f'"{current["version"]}"'} if current else None
    written = client.put(path, body, headers=headers)
    print_workspace(written)
    return Exit.COMPLETED


def _current(client: Client, project: str) -> dict[str, Any] | None:
    """The project's workspace, or None (the list: a project without one is no error)."""
    found: list[dict[str, Any]] = client.get("/v1/workspaces")
    return next((w for w in found if w["project"] == project), None)


def print_workspace(found: dict[str, Any]) -> None:
    escalation = (
        f"review agent {found['review_agent_id']}"
        if found["escalation"] == ConflictEscalation.AGENT
        else "a person"
    )
    commands = ", ".join(found["commands"]) or "none"
    print(f"workspace {found['project']}")
    print(f"repository {found['repository']}, base branch {found['base_branch']}")
    print(f"worktrees: {found['worktrees_in_use']} in use of {found['max_worktrees']} at most")
    print(
        f"merge order: {found['merge_order']}; conflicts go to {escalation}; "
        f"{'cleanup' if found['cleanup_after_merge'] else 'no cleanup'} after a merge; "
        f"{'semantic checks' if found['semantic_checks'] else 'no semantic checks'}"
    )
    print(
        f"commands: {commands} (each up to {found['command_timeout_s']} s, "
        f"{found['output_limit_bytes']} bytes of output)"
    )


# -- worktrees ---------------------------------------------------------------------------


def worktrees(args: argparse.Namespace, client: Client) -> Exit:
    if args.action == "list":
        if args.id:
            raise ClientError(f"list takes no id (loopwright worktrees show {args.id})", Exit.USAGE)
        return _list(args, client)
    if not args.id:
        raise ClientError(f"say which worktree: loopwright worktrees {args.action} ID", Exit.USAGE)
    return {"show": _show, "diff": _diff, "merge": _merge}[args.action](args, client)


def _list(args: argparse.Namespace, client: Client) -> Exit:
    """Newest first, one a line."""
    found = all_pages(client, "/v1/worktrees", project=args.project, status=args.status)
    if not found:
        print("no worktrees (a task gets one when its run first uses a file tool)")
        return Exit.COMPLETED
    rows = [
        (w["id"], w["project"], w["task_id"], w["status"], _changes(w["diff"]), w["branch"])
        for w in found
    ]
    print_table(rows, ("WORKTREE", "PROJECT", "TASK", "STATUS", "CHANGES", "BRANCH"))
    return Exit.COMPLETED


def _show(args: argparse.Namespace, client: Client) -> Exit:
    """Its facts, its diff stat, its last merge and its open escalation."""
    w = client.get(f"/v1/worktrees/{segment(args.id)}")
    print(f"worktree {w['id']}  [{w['status']}]")
    print(f"project {w['project']}, task {w['task_id']}, branch {w['branch']}")
    print(f"directory {w['path']}{' (removed)' if w['removed'] else ''}")
    print(f"base {w['base_sha'][:10]}, head {(w['head_sha'] or 'nothing committed')[:10]}")
    if w["diff"] and w["diff"]["files"]:
        print()
        rows = [(f["path"], str(f["insertions"]), str(f["deletions"])) for f in w["diff"]["files"]]
        print_table(rows, ("FILE", "ADDED", "REMOVED"))
        print(f"total: {_changes(w['diff'])}")
    merge = w["merge"]
    if merge:
        print()
        _print_merge(merge)
    if w["approval_id"]:
        print()
        print(
            f"escalated to a person: approval {w['approval_id']} (loopwright approvals "
            f"approve {w['approval_id']}, or reject {w['approval_id']} --reason R)"
        )
    return Exit.COMPLETED


def _print_merge(merge: dict[str, Any]) -> None:
    print(f"last merge: {merge['outcome']} at {merge['at']}")
    if merge["merged_sha"]:
        print(f"  merged as {merge['merged_sha']}")
    if merge["accepted_by"]:
        print(f"  its semantic issues accepted by {merge['accepted_by']}")
    if merge["detail"]:
        print(f"  {one_line(merge['detail'], 300)}")
    for conflict in merge["conflicts"]:
        print(f"  conflict in {conflict['path']}")
        for hunk in conflict["hunks"]:
            lines = hunk.splitlines()
            for line in lines[:HUNK_LINES]:
                print(f"    {line}")
            if len(lines) > HUNK_LINES:
                print(f"    … {len(lines) - HUNK_LINES} more lines")
    for issue in merge["issues"]:
        where = f"{issue['path']}:{issue['line']}" if issue["line"] else issue["path"]
        print(f"  {issue['check']} {where} {issue['name']}: {issue['message']}")
    for skipped in merge["skipped"]:
        print(f"  not checked: {skipped}")
    if merge["escalation_run_id"]:
        print(
            f"  given to the review agent in run {merge['escalation_run_id']} "
            f"(attempt {merge['agent_attempts']})"
        )


def _diff(args: argparse.Namespace, client: Client) -> Exit:
    """The unified diff as git prints it (for a pager, or `git apply`); a cut is said on
    stderr."""
    found = client.get(f"/v1/worktrees/{segment(args.id)}/diff", limit_bytes=DIFF_LIMIT_BYTES)
    sys.stdout.write(found["text"])
    if not found["text"]:
        print(f"loopwright: no committed change in {found['branch']}", file=sys.stderr)
    if found["truncated"]:
        print(
            f"loopwright: the diff is cut at {found['limit_bytes']} of its "
            f"{found['size_bytes']} bytes",
            file=sys.stderr,
        )
    return Exit.COMPLETED


def _merge(args: argparse.Namespace, client: Client) -> Exit:
    """Exit 0 when merged; 1 when the merge was tried and escalated (a conflict, semantic
    issues); 6 when refused (not queued)."""
    w = client.post(f"/v1/worktrees/{segment(args.id)}/merge")
    merge = w["merge"] or {}
    if w["status"] == WorktreeStatus.MERGED:
        print(f"worktree {w['id']}: merged as {merge.get('merged_sha')}")
        return Exit.COMPLETED
    print(f"worktree {w['id']}: {w['status']}")
    if merge:
        _print_merge(merge)
    if w["approval_id"]:
        print(f"escalated to a person: approval {w['approval_id']}")
    return Exit.FAILED


def _changes(diff: dict[str, Any] | None) -> str:
    if not diff:
        return "—"
    files = len(diff["files"])
    return f"+{diff['insertions']} -{diff['deletions']} in {files} file{'s' * (files != 1)}"


def register(commands: Commands) -> None:
    """`loopwright workspace PROJECT ...` and `loopwright worktrees [ACTION] ...`."""
    space = add_verb(
        commands,
        "workspace",
        "show, set or remove a project's workspace (its git repository, merge order, ...)",
        workspace,
    )
    space.add_argument("project", help="the project")
    space.add_argument(
        "--repo", metavar="PATH", help="the git repository (on the server's machine)"
    )
    space.add_argument("--base", metavar="BRANCH", help="the base branch (default main)")
    space.add_argument(
        "--max", type=count, metavar="N", help="worktrees at once (default 4, at most 8)"
    )
    space.add_argument(
        "--order", choices=[o.value for o in MergeOrder], help="merge order (default completion)"
    )
    space.add_argument(
        "--escalation",
        choices=[e.value for e in ConflictEscalation],
        help="who resolves a conflict (default person; agent needs --review-agent)",
    )
    space.add_argument("--review-agent", metavar="AGENT", help="the agent conflicts go to")
    space.add_argument(
        "--command",
        dest="commands",
        action="extend",
        nargs="*",
        metavar="PROG",
        help="the programs run_command may run (replaces the list; alone: none)",
    )
    space.add_argument(
        "--cleanup",
        action=argparse.BooleanOptionalAction,
        help="remove a worktree's directory once merged (default yes)",
    )
    space.add_argument(
        "--semantic-checks",
        action=argparse.BooleanOptionalAction,
        help="check merged Python files for semantic conflicts (default yes)",
    )
    space.add_argument("--remove", action="store_true", help="remove the workspace")

    trees = add_verb(
        commands,
        "worktrees",
        "list tasks' worktrees, show one (diff stat, merge), print its diff, merge it",
        worktrees,
    )
    trees.add_argument(
        "action", nargs="?", choices=["list", "show", "diff", "merge"], default="list"
    )
    trees.add_argument("id", nargs="?", help="show, diff, merge: the worktree's id")
    trees.add_argument("--project", help="list: only this project's")
    trees.add_argument(
        "--status", choices=[s.value for s in WorktreeStatus], help="list: only this status"
    )
