"""What the coordinator asks of the runs it makes beside the subtasks' own: a peer's
revision in a debate round (decentralized), and the orchestrator's synthesis."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.tasks.schemas.tasks import TaskRead


@dataclass(frozen=True)
class Contribution:
    """A subtask's title and its latest result (its run's answer, or a peer's revision)."""

    title: str
    text: str


def _parent(parent: TaskRead) -> list[str]:
    parts = [f"The task: {parent.title}"]
    if parent.description:
        parts.append(parent.description)
    if parent.acceptance_criteria:
        parts.append("It is done when:\n" + "\n".join(f"- {c}" for c in parent.acceptance_criteria))
    return parts


def _listed(contributions: Sequence[Contribution]) -> str:
    return "\n\n".join(f"## {c.title}\n{c.text}" for c in contributions)


def peer_input(
    parent: TaskRead,
    round_: int,
    rounds: int,
    own: Contribution,
    others: Sequence[Contribution],
) -> str:
    """Round `round_` of `rounds`: the peer sees the others' results on the shared thread
    and answers its own result, revised where theirs show a gap or a conflict."""
    return "\n\n".join(
        [
            *_parent(parent),
            f"Several agents worked parts of this task. This is review round {round_} of "
            f"{rounds}. Your part was {own.title!r}; your result so far:\n{own.text}",
            "The other parts' results:\n\n" + (_listed(others) or "(none)"),
            "Answer with your part's result, revised where the others' show a gap, a "
            "conflict or a mistake in yours; say briefly what you changed and why.",
        ]
    )


def synthesis_input(parent: TaskRead, contributions: Sequence[Contribution]) -> str:
    """The orchestrator joins the parts into the parent's one result."""
    return "\n\n".join(
        [
            *_parent(parent),
            "It was split into parts, each worked by an agent. Their results:",
            _listed(contributions),
            "Synthesise them into the task's one result: resolve conflicts between the "
            "parts, keep what each established, and check it against the task's criteria.",
        ]
    )
