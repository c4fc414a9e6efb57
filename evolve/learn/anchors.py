"""The runs a learned skill's tuned adapter must leave as they are.

An adapter tuned on one run of a new kind of task learns that run's moves, and folded into the
global adapter, which every run gets, it makes them on tasks the model already solved another
way. Anchors are the model's own runs of such tasks (seen families, say), run once with nothing
learned; the tuning keeps its replies on them as the model has them (hypernet.anchor). Only solved
runs are kept: a failure is nothing to keep. The runs and which of them solved are written to the
learner's work folder, so that a later process reads them instead of running them again.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from skillgraft.agent.episodes import EpisodeJob
from skillgraft.agent.loadout import NOTHING
from skillgraft.agent.runner import RunResult
from skillgraft.agent.seams import AnchoredTuner, SkillCompiler
from skillgraft.agent.task import Task
from skillgraft.agent.trajectory import conversation_without_skills

RECORD = "anchors.json"


def anchor_runs(tasks: Sequence[Task], run: Callable[[Sequence[EpisodeJob]], dict[int, RunResult]],
                folder: Path) -> tuple[list[list[dict]], str, int]:
    """(the solved runs' conversations, skill texts left out; a key naming them; how many tasks
    were run), running the tasks with nothing learned (`run(jobs)`: each job's result by its id())
    unless `folder` holds the runs of these very tasks."""
    folder = Path(folder)
    ids = [t.id for t in tasks]
    record = folder / RECORD
    kept = json.loads(record.read_text()) if record.is_file() else None
    if kept is None or kept.get("tasks") != ids:
        jobs = [EpisodeJob(t, NOTHING, folder / f"{i:03d}.json") for i, t in enumerate(tasks)]
        results = run(jobs)
        kept = {"tasks": ids, "solved": [i for i, job in enumerate(jobs) if results[id(job)].success]}
        folder.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(kept))
    solved = kept["solved"]
    conversations = [conversation_without_skills(folder / f"{i:03d}.json") for i in solved]
    key = hashlib.sha256("\0".join(ids[i] for i in solved).encode()).hexdigest()[:12]
    return conversations, key, len(ids)


def fold_compiler(compiler: SkillCompiler | None, tasks: Sequence[Task],
                  run: Callable[[Sequence[EpisodeJob]], dict[int, RunResult]],
                  folder: Path) -> tuple[SkillCompiler | None, str | None]:
    """(the compiler of what the global adapter folds, a note): `compiler` keeping the model's
    solved runs of `tasks`, where it tunes with an anchor weight and some task was solved; else
    `compiler` itself (and a note when no anchor task was solved)."""
    if not tasks or not isinstance(compiler, AnchoredTuner) or not compiler.wants_anchors:
        return compiler, None
    conversations, key, ran = anchor_runs(tasks, run, folder)
    if not conversations:
        return compiler, f"no anchor task of {ran} was solved: the global adapter folds adapters tuned without anchors"
    return compiler.anchored(conversations, key), (f"the global adapter folds learned adapters that keep the model's "
                                                   f"runs of {len(conversations)} anchor tasks ({ran} run)")
