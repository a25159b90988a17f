"""The runs' behaviour: commands, components and pure rules."""
