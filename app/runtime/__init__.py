"""What the components of one process share: the background component written once and
supervised (`components.py`), the registry they start and stop in (`lifecycle.py`), the
group commit that batches the loop's writes, and locks held per key."""
