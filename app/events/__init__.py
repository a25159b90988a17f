"""Events and streams: the outbox every event stream reads, the bus and Postgres NOTIFY
that wake its readers, and Server-Sent Events over HTTP.
Each layer has its folder or module, named alike in every domain (docs/architecture.md)."""
