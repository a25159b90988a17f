"""Tasks and boards: the TaskEngine (the one writer of task state), Kanban boards and WIP
limits, the review gate, and tasks kept in step with the runs that execute them.
Each layer has its folder or module, named alike in every domain (docs/architecture.md)."""
