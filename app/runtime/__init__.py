"""What the components of one process share: passes run on a tick, the group commit that
batches the loop's writes, and locks held per key."""
