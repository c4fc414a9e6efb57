"""Sessions: success per learning session as a chart (learning on against off), and every session."""
from __future__ import annotations

from functools import lru_cache

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from skillgraft.evolve.learn.curve import SessionPoint, curves_figure
from skillgraft.skills.schema import Session
from skillgraft.skills.store import Store
from skillgraft.ui.charts import image
from skillgraft.ui.render import page

router = APIRouter()


def learning_curves(sessions: list[Session]) -> dict[str, list[SessionPoint]]:
    """One curve per model and learning on/off, over the finished `learn` sessions in order."""
    finished = [s for s in sessions if s.kind == "learn" and s.summary and s.summary.get("episodes")]
    models = {(s.config or {}).get("model") for s in finished}
    curves: dict[str, list[SessionPoint]] = {}
    for s in finished:
        config, summary = s.config or {}, s.summary or {}
        label = "learning " + ("on" if config.get("learning", True) else "off")
        if len(models) > 1:
            label += f" · {config.get('model')}"
        points = curves.setdefault(label, [])
        points.append(SessionPoint(len(points) + 1, int(summary["successes"]), int(summary["episodes"])))
    return curves


# Drawn again only when a session's count changes: a chart costs more than the rest of the page.
@lru_cache(maxsize=32)
def _chart(curves: tuple[tuple[str, tuple[SessionPoint, ...]], ...]) -> Markup:
    return image(curves_figure(dict(curves), "success per learning session"), "success per learning session")


@router.get("/sessions", response_class=HTMLResponse)
def sessions(request: Request) -> HTMLResponse:
    store: Store = request.app.state.store
    rows = store.sessions()
    curves = learning_curves(rows)
    chart = _chart(tuple((label, tuple(points)) for label, points in curves.items())) if curves else None
    return page(request, "sessions.html", rows=list(reversed(rows)), chart=chart, curves=curves)
