"""Costs and budgets: what LLM calls cost, and the limits on what an agent or a project may
spend in a day or a month.
Each layer has its folder or module, named alike in every domain (docs/architecture.md)."""
