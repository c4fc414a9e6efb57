"""Trajectories: the runs on record, and one run step by step with its patch and verdict."""
from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from skillgraft.agent.prompts import read_observation, split_reply
from skillgraft.agent.trajectory import read_trajectory
from skillgraft.skills.store import Store
from skillgraft.ui.render import PAGE_SIZE, page, pages, still_stored

router = APIRouter()


@router.get("/trajectories", response_class=HTMLResponse)
def trajectories(request: Request, skill: str | None = None, session: int | None = None,
                 number: int = Query(1, alias="page")) -> HTMLResponse:
    store: Store = request.app.state.store
    paging = pages(store.count_trajectories(skill, session), number)
    rows = store.trajectories(skill, session, limit=PAGE_SIZE, offset=paging["offset"])
    return page(request, "trajectories.html", rows=rows, paging=paging, skill=skill, session=session)


@dataclass
class Step:
    number: int
    thought: str
    command: str | None  # None: the reply held no single command (a format error)
    returncode: int | None = None
    notes: list[str] = field(default_factory=list)  # timed out, output elided
    output: str | None = None
    other: str | None = None  # what came back when it was not a command's output


def steps_of(messages: list[dict]) -> tuple[list[dict], list[Step]]:
    """The opening messages (system prompt, task with skills), then one step per reply."""
    first_reply = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))
    steps: list[Step] = []
    for m in messages[first_reply:]:
        content = str(m.get("content", ""))
        if m.get("role") == "assistant":
            thought, command = split_reply(content)
            steps.append(Step(len(steps) + 1, thought, command))
        elif steps:
            seen = read_observation(content)
            if seen is None:
                steps[-1].other = content
            else:
                steps[-1].returncode, steps[-1].notes, steps[-1].output = seen
    return messages[:first_reply], steps


@router.get("/trajectories/{trajectory_id}", response_class=HTMLResponse)
def trajectory(request: Request, trajectory_id: int) -> HTMLResponse:
    store: Store = request.app.state.store
    row = store.trajectory(trajectory_id)  # one it does not hold: the 404 page, by the app's NotFound handler
    try:
        data = read_trajectory(store.trajectory_path(row))
        problem = None
    except ValueError as exc:
        data, problem = {"info": {}, "messages": []}, str(exc)
    opening, steps = steps_of(data["messages"])
    return page(request, "trajectory.html", row=row, info=data["info"], opening=opening, steps=steps, problem=problem,
                versions=still_stored(store.version, row.skill_version_ids),
                adapters=still_stored(store.adapter, row.adapter_ids), taught=store.versions_from_trajectory(trajectory_id))
