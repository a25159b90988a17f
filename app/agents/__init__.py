"""Agents: their configuration (prompt, model, tools, limits) and how many tasks each holds.
Each layer has its folder or module, named alike in every domain (docs/architecture.md)."""
