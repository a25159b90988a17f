"""The workspace tools: `read_file`, `list_files`, `search`, `write_file`, `apply_patch` and
`run_command`, for runs whose task's project has a workspace. Each works in the
task's own worktree (made at the first call), every path confined to it (`..`, absolute
paths, `.git` and symbolic links leading out are refused), every answer capped.

Approval: the worktree is the task's alone and its work reaches the base branch only
through the task's review and the merge, so none of these asks a person per call.
`write_file` and `apply_patch` are idempotent (the same content written again, a patch
applied again, change nothing), so a call re-run after a crash is harmless;
`run_command` is not (a program may do anything its allowlist lets it), so a call cut
short by a crash is not re-run. Writes are refused once the task's work is queued for
its merge (or merged): its worktree is no longer the runs' to change.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from app.core.errors import AppError
from app.runs.tools.base import Tool, ToolContext, ToolFailure, define_tool, parse_arguments
from app.workspaces.engine.worktrees import Opened, Worktrees
from app.workspaces.repo import files
from app.workspaces.repo.commands import CommandPolicy, run_command
from app.workspaces.repo.errors import GitError, WorkspaceError
from app.workspaces.repo.patches import apply_patch

WORKSPACE_TOOL_NAMES = (
    "read_file",
    "list_files",
    "search",
    "write_file",
    "apply_patch",
    "run_command",
)
LIMITS = files.FileLimits()
PATCH_MAX_BYTES = 1_000_000
RelativePath = Annotated[
    str, Field(min_length=1, max_length=4_096, description="Relative to the worktree's root.")
]


class ReadFileArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: RelativePath


class ListFilesArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(".", min_length=1, max_length=4_096)
    recursive: bool = False


class SearchArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pattern: str = Field(min_length=1, max_length=1_000)
    path: str = Field(".", min_length=1, max_length=4_096)
    regex: bool = Field(False, description="A Python regular expression, not literal text.")
    ignore_case: bool = False


class WriteFileArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: RelativePath
    content: str = Field(max_length=LIMITS.write_max_bytes, description="The whole file.")


class ApplyPatchArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    patch: str = Field(
        min_length=1, max_length=PATCH_MAX_BYTES, description="A unified diff (`git diff`)."
    )


class RunCommandArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    argv: list[str] = Field(
        min_length=1,
        max_length=200,
        description="The program (one the workspace allows) and its arguments; no shell.",
        examples=[["pytest", "-q", "tests/test_parser.py"]],
    )


Handler = Callable[[Opened, Any], Awaitable[dict[str, Any]]]


def workspace_tools(worktrees: Worktrees) -> list[Tool]:
    def handler(
        model: type[BaseModel], work: Handler, *, writes: bool = False
    ) -> Callable[[ToolContext, dict[str, Any]], Awaitable[str]]:
        async def handle(context: ToolContext, arguments: dict[str, Any]) -> str:
            args = parse_arguments(model, arguments)
            try:
                opened = await worktrees.of_run(context.run_id)
            except AppError as exc:  # the workspace is full, or the database is down
                raise ToolFailure(exc.detail, transient=True) from None
            except WorkspaceError as exc:
                raise ToolFailure(f"the workspace is not reachable: {exc}") from None
            if opened is None:
                raise ToolFailure("this run's task has no workspace: its project sets none")
            if writes and not opened.writable:
                raise ToolFailure(
                    f"the worktree is {opened.worktree.status.value}: its files no longer change"
                )
            try:
                answer = await work(opened, args)
            except GitError as exc:
                raise ToolFailure(f"git failed: {exc.stderr.strip() or exc}") from None
            except WorkspaceError as exc:  # a refused path, patch or command
                raise ToolFailure(str(exc)) from None
            return json.dumps(answer, separators=(",", ":"), ensure_ascii=False)

        return handle

    async def read(opened: Opened, args: ReadFileArguments) -> dict[str, Any]:
        found = await files.read_file(opened.root, args.path, LIMITS)
        return {
            "path": found.path,
            "size": found.size,
            "binary": found.binary,
            "truncated": found.truncated,
            "text": found.text,
        }

    async def listing(opened: Opened, args: ListFilesArguments) -> dict[str, Any]:
        found = await files.list_files(
            opened.root, args.path, recursive=args.recursive, limits=LIMITS
        )
        entries = [
            {
                "path": e.path,
                "kind": e.kind.value,
                **({"size": e.size} if e.size is not None else {}),
            }
            for e in found.entries
        ]
        return {"entries": entries, "truncated": found.truncated}

    async def searching(opened: Opened, args: SearchArguments) -> dict[str, Any]:
        found = await files.search(
            opened.root,
            args.pattern,
            args.path,
            regex=args.regex,
            ignore_case=args.ignore_case,
            limits=LIMITS,
        )
        return {
            "matches": [{"path": m.path, "line": m.line, "text": m.text} for m in found.matches],
            "truncated": found.truncated,
            "files_searched": found.files_searched,
        }

    async def write(opened: Opened, args: WriteFileArguments) -> dict[str, Any]:
        done = await files.write_file(opened.root, args.path, args.content, LIMITS)
        return {"path": done.path, "changed": done.changed, "created": done.created}

    async def patch(opened: Opened, args: ApplyPatchArguments) -> dict[str, Any]:
        done = await apply_patch(
            opened.repo.git, opened.root, args.patch, max_bytes=PATCH_MAX_BYTES
        )
        return {"files": list(done.files), "changed": done.changed}

    async def command(opened: Opened, args: RunCommandArguments) -> dict[str, Any]:
        workspace = opened.workspace
        policy = CommandPolicy(
            allowlist=frozenset(workspace.commands),
            timeout_s=workspace.command_timeout_s,
            output_cap_bytes=workspace.output_limit_bytes,
        )
        done = await run_command(args.argv, cwd=opened.root, policy=policy)
        return {
            "exit_code": done.exit_code,
            "stdout": done.stdout,
            "stderr": done.stderr,
            "truncated": done.truncated,
            "timed_out": done.timed_out,
        }

    def safe(name: str, description: str, model: type[BaseModel], work: Handler) -> Tool:
        writes = name in ("write_file", "apply_patch")
        return define_tool(
            name,
            description,
            model.model_json_schema(),
            handler(model, work, writes=writes),
            idempotent=True,
            retries=True,
            destructive=False,
            requires_approval=False,
        )

    return [
        safe(
            "read_file",
            "Read a text file of the task's worktree (its first 256 kB).",
            ReadFileArguments,
            read,
        ),
        safe(
            "list_files",
            "List a directory of the task's worktree (`recursive` for everything under it).",
            ListFilesArguments,
            listing,
        ),
        safe(
            "search",
            "Find lines matching text (or a regular expression) in the worktree's files.",
            SearchArguments,
            searching,
        ),
        safe(
            "write_file",
            "Write a whole file in the task's worktree (made with its directories if new).",
            WriteFileArguments,
            write,
        ),
        safe(
            "apply_patch",
            "Apply a unified diff to the task's worktree: all of it or none.",
            ApplyPatchArguments,
            patch,
        ),
        define_tool(
            "run_command",
            "Run a program the workspace allows (tests, linters) in the task's worktree, "
            "without a shell; answers its exit code and output (capped).",
            RunCommandArguments.model_json_schema(),
            handler(RunCommandArguments, command, writes=True),
            idempotent=False,
            destructive=False,
            requires_approval=False,
        ),
    ]
