"""What a process tells its operators: Prometheus metrics, structured logs and traces."""
