"""Workflows: definitions (a graph of nodes), the built-in templates, executions, and the
observer that moves an execution as its tasks move.
Each layer has its folder or module, named alike in every domain (docs/architecture.md)."""
