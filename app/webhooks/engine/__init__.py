"""Outbound webhooks: subscription commands, and the deliverer that sends the deliveries the
database queues in each subscribable event's own transaction (migration 0012's trigger)."""
