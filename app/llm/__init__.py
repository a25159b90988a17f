"""LLM providers behind one protocol, the provider-neutral message form, token estimates."""
