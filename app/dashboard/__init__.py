"""The web dashboard's shell, served at `/ui`: login, the request dependencies, the Jinja2
environment with its templates and static files, the overview, and `pages.install` that
mounts every domain's pages (each in its domain's `ui`).

The pages sit beside the API's routes (they import none of them): they read through the
stores and reach the engines through the API's routes, called from the browser."""
