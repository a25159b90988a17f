"""Workspaces: a git worktree per task run, the file and command tools confined
to it, the ordered merge back to the base branch and the semantic conflict checks. This
package knows git and the file system, not the database: the engine drives it."""
