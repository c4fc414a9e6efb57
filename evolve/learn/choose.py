"""Which skills a task gets, and which skill a success is written into."""
from __future__ import annotations

from skillgraft.agent.seams import SkillStore
from skillgraft.agent.task import Task
from skillgraft.evolve.learn.summarise import skill_name_for
from skillgraft.skills.schema import SkillVersion


def query_for(task: Task) -> str:
    """What retrieval searches with: the family and tags name the kind of task even when the
    instruction is generic (every SkillWorld task says only that the tests fail)."""
    return " ".join(part for part in [task.family or "", *task.tags, task.instruction] if part).replace("_", " ")


def retrieve(store: SkillStore, task: Task, k: int, min_score: float = 0.0, *,
             borrow: bool = False) -> list[SkillVersion]:
    """The latest versions of the k skills most relevant to the task (none from an empty store).

    A skill that names the family it is for (frontmatter metadata `family`) is not given to a
    task of another family: its own label says it does not apply. With `borrow` (practice, where
    a run is a try and not a score), a task that nothing fits gets the closest skills of other
    families instead: what worked on the nearest kind of task is the best first guess.
    """
    if k <= 0:
        return []
    hits = [h for h in store.search(query_for(task), k=3 * k) if h.score >= min_score]
    fits = [h.version for h in hits if not (task.family and family_of(h.version) not in (None, task.family))]
    if borrow and not fits:
        fits = [h.version for h in hits]
    return fits[:k]


def family_of(version: SkillVersion) -> str | None:
    meta = (version.frontmatter or {}).get("metadata") or {}
    return meta.get("family") if isinstance(meta, dict) else None


def target_skill(store: SkillStore, task: Task, used: list[SkillVersion]) -> str:
    """Where a summary of a success on `task` goes.

    The skill that was used, when it is the skill for this task's family; otherwise the family's
    own skill (made if new). A retrieved skill of another family is never overwritten: a success
    with the wrong recipe in hand says nothing about that recipe.
    """
    if task.family:
        own = skill_name_for(task.family)
        for v in used:
            if v.skill_name == own or family_of(v) == task.family:
                return v.skill_name
        return own
    if used:
        return used[0].skill_name
    return skill_name_for(task.id)
