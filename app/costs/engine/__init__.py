"""The costs' and budgets' behaviour: commands, components and pure rules."""
