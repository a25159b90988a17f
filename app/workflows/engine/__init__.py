"""The workflows' behaviour: commands, components and pure rules."""
