"""The tasks' and boards' behaviour: commands, components and pure rules."""
