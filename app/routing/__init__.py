"""Routing: which agent takes a task, by one of six strategies.
Each layer has its folder or module, named alike in every domain (docs/architecture.md)."""
