"""The agent loop: executor, tools, and (later) detectors, compaction and the journal."""
