"""Workspaces on the engine's side: a project's settings, a worktree for each of
its tasks (made when a run first touches a file), the file tools' way to it, and the merge
queue that brings approved work to the base branch in order. `app.workspaces.repo` does the
git and file-system work; this package keeps the rows, the events and the order."""
