"""Runs and the agent loop: runs, lanes, conversations and their history; the workers that
claim runs, the loop that executes one, the tools it calls, and the reconciler.
Each layer has its folder or module, named alike in every domain (docs/architecture.md)."""
