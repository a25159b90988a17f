"""The agents' SQL only: functions take a session, flush when they write, and never commit."""
