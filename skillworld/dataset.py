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

from skillworld.episodes import Episode, run_episodes
from skillworld.expert import Step, plan
from skillworld.generate import generate


def episode_record(ep: Episode) -> dict:
    return {"id": ep.task.id, "family": ep.task.family, "seed": ep.task.seed, "success": ep.success,
            "steps": [[s.thought, s.command, s.output, s.returncode] for s in ep.steps]}


def load_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def record_steps(record: dict, skill_in_context: bool = False) -> list[Step]:
    """An episode's steps; with skill_in_context, with the thoughts the expert has when its
    family's skill is in context (the commands and outputs are the same)."""
    steps = [Step(*s) for s in record["steps"]]
    if not skill_in_context:
        return steps
    thoughts = [thought for thought, _ in plan(generate(record["family"], record["seed"]), skill_in_context=True)]
    return [replace(step, thought=thought) for step, thought in zip(steps, thoughts, strict=True)]


def build_episodes(families: list[str], per_family: int, path: Path, *, first_seed: int = 0,
                   backend: str = "auto", chunk: int = 26,
                   progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Runs the expert on seeds first_seed.. of each family, appending to path (so an
    interrupted build resumes); returns every record, failures excluded."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {r["id"]: r for r in load_records(path)} if path.exists() else {}
    todo = [generate(f, s) for s in range(first_seed, first_seed + per_family) for f in families]
    todo = [wt for wt in todo if wt.id not in done]
    total = len(todo)
    for start in range(0, total, chunk):
        batch = run_episodes(todo[start:start + chunk], backend=backend)
        with path.open("a") as fh:
            for ep in batch:
                record = episode_record(ep)
                done[record["id"]] = record
                fh.write(json.dumps(record) + "\n")
        if progress:
            progress(min(start + chunk, total), total)
    wanted = {wt.id for wt in (generate(f, s) for s in range(first_seed, first_seed + per_family) for f in families)}
    return [r for i, r in done.items() if i in wanted and r["success"]]
