"""The sprints' behaviour: commands, components and pure rules."""
