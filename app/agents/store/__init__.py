"""The agents' SQL: functions take a session, flush when they write, and never commit."""
