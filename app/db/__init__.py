"""The database: engines and sessions, statements sent straight to asyncpg, migrations, the
embedded PostgreSQL, riding out an outage, the declarative base, and idempotency keys."""
