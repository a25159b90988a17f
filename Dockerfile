# Loopwright service image. `compose.yaml` runs it with its Postgres; on its own:
#   docker run -p 8000:8000 -e DATABASE_URL=postgresql://... \
#     -e LOOPWRIGHT_AUTH__API_KEYS='["change-me"]' loopwright
# It binds 0.0.0.0, which the service refuses to do without API keys.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# git: workspaces make worktrees of, and merge into, the repositories they name.
RUN apt-get update && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 loopwright
WORKDIR /srv/loopwright

# The dependencies first, from the project's metadata alone, so that a change to the code
# reuses this layer. constraints.txt pins them when the checkout has one (the glob lets the
# COPY pass without it). The build backend comes along for the project's own install below.
COPY pyproject.toml constraints.txt* ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb')); \
print('\n'.join(p['project']['dependencies'] + p['build-system']['requires']))" \
    > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt $([ -f constraints.txt ] && echo -c constraints.txt) \
    && rm /tmp/requirements.txt

# The code. Editable, because the migrations are found next to `app/` (app/db/migrate.py);
# compiled here, since the non-root user cannot write __pycache__ and every start would
# otherwise compile the whole app again.
COPY README.md alembic.ini ./
COPY migrations ./migrations
COPY app ./app
RUN pip install --no-deps --no-build-isolation -e . && python -m compileall -q app migrations

USER loopwright
ENV LOOPWRIGHT_SERVER__HOST=0.0.0.0 LOOPWRIGHT_SERVER__PORT=8000
EXPOSE 8000
# Healthy once ready: migrated, the database answering and the task engine taking writes.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"]
# Exec form: the server is PID 1 and gets SIGTERM itself, then drains (README: shutdown).
CMD ["loopwright", "serve"]
