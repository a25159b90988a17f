"""The HTTP shell: middleware, request dependencies, problem documents, pagination, the
OpenAPI document, health and metrics. Each domain's routes are in its `api`."""
