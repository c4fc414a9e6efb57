"""CycleQD: each run's archives as heatmaps at any generation, and what its final merge scored."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from skillgraft.evolve.cycleqd import archives_at, quality_range
from skillgraft.skills.store import Store
from skillgraft.ui.charts import archive_svg
from skillgraft.ui.render import page

router = APIRouter()


@router.get("/cycleqd", response_class=HTMLResponse)
def runs(request: Request) -> HTMLResponse:
    store: Store = request.app.state.store
    return page(request, "cycleqd.html", runs=list(reversed(store.qd_runs())))


@router.get("/cycleqd/{run_id}", response_class=HTMLResponse)
def run(request: Request, run_id: int, generation: int | None = None) -> HTMLResponse:
    store: Store = request.app.state.store
    row = store.qd_run(run_id)  # one it does not hold: the 404 page, by the app's NotFound handler
    state = dict(row.state or {})
    if "binning" not in state:  # killed before its starting checkpoints were scored
        return page(request, "cycleqd_run.html", row=row, state=state, maps=[], generation=None, counts={})
    shown = row.generation if generation is None else min(max(generation, 0), row.generation)
    final = archives_at(state, row.generation)
    vmin, vmax = quality_range(final)  # one colour scale across generations, so they compare
    maps = [(task, archive.stats(), archive_svg(archive, vmin, vmax)) for task, archive in archives_at(state, shown).items()]
    counts: dict[int, int] = {}
    for g, *_ in state.get("placed", []):
        counts[g] = counts.get(g, 0) + 1
    return page(request, "cycleqd_run.html", row=row, state=state, maps=maps, generation=shown, counts=counts,
                merge=state.get("merge"))
