"""The sprints' shapes the API reads and writes."""
