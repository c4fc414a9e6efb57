"""Expert episodes on training seeds, made once and cached as JSON lines.

An episode is executed once; the training set then shows it several ways (no skill in
context, or one of its family's skill paraphrases), since the commands and what they print
do not depend on what the prompt says.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from skillgraft.skillworld.episodes import Episode, run_episodes
from skillgraft.skillworld.expert import Step, can_make, plan
from skillgraft.skillworld.generate import generate


def episode_record(ep: Episode) -> dict:
    record = {"id": record_id(ep.task.id, ep.mistake), "family": ep.task.family, "seed": ep.task.seed,
              "success": ep.success, "steps": [[s.thought, s.command, s.output, s.returncode] for s in ep.steps]}
    if ep.mistake:
        record["mistake"] = ep.mistake
    return record


def record_id(task_id: str, mistake: str | None) -> str:
    return f"{task_id}+{mistake}" if mistake else task_id


def load_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def record_steps(record: dict, skill_in_context: bool = False) -> list[Step]:
    """An episode's steps; with skill_in_context, with the thoughts the expert has when its
    family's skill is in context (the commands and outputs are the same)."""
    steps = [Step(*s) for s in record["steps"]]
    if not skill_in_context:
        return steps
    wt = generate(record["family"], record["seed"])
    thoughts = [thought for thought, _ in plan(wt, skill_in_context=True, mistake=record.get("mistake"))]
    return [replace(step, thought=thought) for step, thought in zip(steps, thoughts, strict=True)]


def build_episodes(families: list[str], per_family: int, path: Path, *, first_seed: int = 0,
                   backend: str = "auto", chunk: int = 26, mistake: str | None = None,
                   progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Runs the expert on seeds first_seed.. of each family, appending to path (so an
    interrupted build resumes); returns every record, failures excluded. mistake: every
    episode makes this wrong step and recovers (expert.plan); tasks where it cannot be made
    are skipped."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {r["id"]: r for r in load_records(path)} if path.exists() else {}
    wanted = [generate(f, s) for s in range(first_seed, first_seed + per_family) for f in families]
    if mistake:
        wanted = [wt for wt in wanted if can_make(wt, mistake)]
    todo = [wt for wt in wanted if record_id(wt.id, mistake) not in done]
    total = len(todo)
    for start in range(0, total, chunk):
        batch = run_episodes(todo[start:start + chunk], backend=backend, mistake=mistake)
        with path.open("a") as fh:
            for ep in batch:
                record = episode_record(ep)
                done[record["id"]] = record
                fh.write(json.dumps(record) + "\n")
        if progress:
            progress(min(start + chunk, total), total)
    ids = {record_id(wt.id, mistake) for wt in wanted}
    return [r for i, r in done.items() if i in ids and r["success"]]
