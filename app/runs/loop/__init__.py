"""The agent loop for one claimed run: its turns, boundaries, detectors, compaction and
exits, and the loop kinds that drive the turns."""
