"""The sprints' dashboard pages."""
