"""Outbound webhooks: subscriptions to event types, and deliveries signed, sent and
retried.
Each layer has its folder or module, named alike in every domain (docs/architecture.md)."""
