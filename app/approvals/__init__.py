"""Approvals: what waits on a person (a task's review, a gated tool call), the answers,
their context summaries and their timeouts.
Each layer has its folder or module, named alike in every domain (docs/architecture.md)."""
