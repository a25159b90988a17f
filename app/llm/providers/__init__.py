"""The model providers, one package each (`anthropic`, `openai`, `scripted`) holding its
wire module, its errors in neutral classes, its settings group, its prices and tiers, and
its `PROVIDER` (`kind.ProviderKind`); the registry (`registry.Providers`) picks one by an
agent's `model.provider`."""
