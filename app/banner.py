"""What `loopwright serve` says once it is ready: where to go (the dashboard, the API docs),
where its data lives and how to start afresh, which model providers can be used, and how
to stop."""

from __future__ import annotations

from sqlalchemy.engine import make_url

from app.core.config import Settings
from app.llm.providers.registry import KINDS, missing_credentials


def banner(settings: Settings) -> str:
    server, database = settings.server, settings.database
    host = f"[{server.host}]" if ":" in server.host else server.host
    base = f"http://{host}:{server.port}"
    if database.url is None:
        data = (
            f"embedded PostgreSQL in {database.embedded_data_dir} "
            "(to start afresh: stop the service, delete that directory)"
        )
    else:
        url = make_url(database.url)
        data = f"PostgreSQL {url.host or 'local socket'}/{url.database} (LOOPWRIGHT_DATABASE__URL)"
    missing = missing_credentials(settings.llm)
    usable = ", ".join(name for name in KINDS if name not in missing)
    providers = "; ".join([usable, *(f"not {name}: {fix}" for name, fix in missing.items())])
    workers = settings.workers
    running = f"{workers.capacity} runs at a time" if workers.enabled else "off in this process"
    lines = [
        f"Loopwright is ready at {base}",
        f"  dashboard  {base}/ui{' (log in with an API key)' if settings.auth.api_keys else ''}",
        f"  API docs   {base}/docs",
        f"  data       {data}",
        f"  models     {providers}",
        f"  workers    {running}",
        "  try        loopwright run 'hello'",
        "  stop       Ctrl+C (runs in flight go back to the queue and resume on next start)",
    ]
    return "\n".join(lines)
