"""HTTP only: routers, dependencies, error rendering and SSE streams."""
