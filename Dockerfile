# Loopwright service image. Listening beyond loopback requires API keys:
#   docker run -p 8000:8000 -e DATABASE_URL=postgresql://... \
#     -e LOOPWRIGHT_AUTH__API_KEYS='["change-me"]' loopwright
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN useradd --create-home --uid 10001 loopwright
WORKDIR /srv/loopwright

COPY pyproject.toml constraints.txt README.md alembic.ini ./
COPY app ./app
COPY migrations ./migrations
RUN pip install -c constraints.txt -e .

USER loopwright
ENV LOOPWRIGHT_SERVER__HOST=0.0.0.0 LOOPWRIGHT_SERVER__PORT=8000
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz')"
CMD ["loopwright", "serve"]
