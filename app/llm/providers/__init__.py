"""The model providers, one module per wire format (`anthropic`, `scripted`), each
mapping its vendor's errors to neutral classes, and the registry (`registry.Providers`)
that picks one by an agent's `model.provider`."""
