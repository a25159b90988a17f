"""A task's coordination (`POST /v1/tasks/{id}/coordinate`): decompose the parent into a
DAG of subtasks, route them, resolve the topology, validate, dispatch the DAG in waves,
roll the subtasks' statuses up and update the parent. The pure rules of each phase live
in a module of their own."""
