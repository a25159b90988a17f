"""The event streams' behaviour: commands, components and pure rules."""
