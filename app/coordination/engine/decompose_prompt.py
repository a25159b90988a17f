"""What the decomposer's model is told: its system prompt, and the parent task with the
roles and skills its subtasks may be routed to. The team is summed up by role (each role's
skills together), within bounds, so a large team cannot crowd out the task."""

from __future__ import annotations

from collections.abc import Sequence

from app.agents.schemas import AgentRead
from app.coordination.schemas import MAX_SUBTASKS
from app.core.vocabulary import TaskStructure
from app.tasks.schemas.tasks import TaskRead

ROLES_SHOWN = 30
SKILLS_SHOWN = 30  # of each role

SYSTEM = (
    "You split a task into subtasks that agents carry out, each on its own. Call "
    f"submit_decomposition once, with 1 to {MAX_SUBTASKS} subtasks that together meet every "
    "acceptance criterion of the task. Give each subtask a short title, a description of "
    "what to do, and acceptance criteria a reviewer can check. A subtask's depends_on lists "
    "the subtasks whose results it needs (by index from 0, or by key): they finish before "
    "it starts, and subtasks that depend on none of each other run side by side. The "
    "dependencies must form no cycle. Give a role or required skills only when the team "
    "listed has them."
)

_STRUCTURE = {
    TaskStructure.SEQUENTIAL: "sequential: its parts build on each other, in order",
    TaskStructure.PARALLEL: "parallel: its parts are independent and may run side by side",
    TaskStructure.MIXED: "mixed: some parts depend on others, some may run side by side",
}


def describe(parent: TaskRead, team: Sequence[AgentRead]) -> str:
    """The user message: the parent's title, description, complexity, structure and
    acceptance criteria, then the team's roles with their skills (when given)."""
    lines = [f"Task: {parent.title}"]
    if parent.description:
        lines.append(parent.description)
    lines.append(f"Complexity: {parent.estimated_complexity.value}")
    lines.append(f"Structure: {_STRUCTURE[parent.task_structure]}")
    if parent.acceptance_criteria:
        lines.append("Acceptance criteria of the whole task:")
        lines += [f"- {criterion}" for criterion in parent.acceptance_criteria]
    roles = _roles(team)
    if roles:
        lines.append("The team (role: skills):")
        lines += [f"- {role}: {', '.join(skills) or 'none listed'}" for role, skills in roles]
    return "\n".join(lines)


def _roles(team: Sequence[AgentRead]) -> list[tuple[str, list[str]]]:
    """Each role (by name) with its agents' skills, sorted and bounded."""
    skills: dict[str, set[str]] = {}
    for agent in team:
        skills.setdefault(agent.role, set()).update(agent.skills)
    return [(role, sorted(skills[role])[:SKILLS_SHOWN]) for role in sorted(skills)[:ROLES_SHOWN]]
