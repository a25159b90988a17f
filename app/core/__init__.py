"""The shared kernel: the vocabulary (states, errors, ids, settings, messages, stream
names) and small pure mechanisms; it imports nothing else of the app."""
