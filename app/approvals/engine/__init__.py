"""The approvals' behaviour: commands, components and pure rules."""
