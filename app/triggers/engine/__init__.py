"""Triggers: what starts runs and workflow executions without a client's call (webhooks
in, schedules, chains: each kind a module of `kinds/`), and the one path every fire takes
to start its target."""
