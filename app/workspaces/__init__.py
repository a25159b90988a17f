"""Workspaces: a project's git repository, a worktree per task, the file and command
tools, and the merge queue that brings approved work to the base branch.
Each layer has its folder or module, named alike in every domain (docs/architecture.md)."""
