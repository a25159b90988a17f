"""The tasks' and boards' SQL: functions take a session, flush when they write, and
never commit."""
