"""The runs' command-line verbs."""
