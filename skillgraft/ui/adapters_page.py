"""Adapters: the global adapter's versions with what went into each, and one adapter's ΔW per layer."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from skillgraft.skills.errors import NotFound, StoreError
from skillgraft.skills.schema import Adapter, SkillVersion, saved_id
from skillgraft.skills.store import Store
from skillgraft.ui.charts import image, norms_figure
from skillgraft.ui.render import page, still_stored

router = APIRouter()


def _skill_versions(store: Store, rows: list[Adapter]) -> dict[int, SkillVersion]:
    """The skill versions named by these adapters (compiled from, or folded in by an EMA step)."""
    wanted = {vid for r in rows for vid in (r.skill_version_id, (r.provenance or {}).get("skill_version_id")) if vid}
    return {saved_id(v.id): v for v in still_stored(store.version, wanted)}


@router.get("/adapters", response_class=HTMLResponse)
def adapters(request: Request, name: str = "global") -> HTMLResponse:
    store: Store = request.app.state.store
    history = list(reversed(store.global_history(name)))
    names = sorted({r.name for r in store.adapters(kind="global")})
    return page(request, "adapters.html", name=name, names=names, history=history,
                versions=_skill_versions(store, history))


# Adapters never change once stored, so their norms and chart are computed once per server.
@lru_cache(maxsize=256)
def _norms(folder: str, title: str) -> tuple[dict[str, float], Markup]:
    from skillgraft.hypernet.lora import frobenius_norm
    from skillgraft.hypernet.peft_io import load_adapter

    delta, _ = load_adapter(Path(folder))
    norms = {_short(module): frobenius_norm({module: low_rank}) for module, low_rank in delta.items()}
    return norms, image(norms_figure(norms, title), "ΔW norm per module")


def _short(module: str) -> str:
    """`base_model.model.model.layers.3.self_attn.q_proj` → `3.self_attn.q_proj`."""
    match = re.search(r"layers\.(.+)$", module)
    return match.group(1) if match else module


@router.get("/adapters/{adapter_id}", response_class=HTMLResponse)
def adapter(request: Request, adapter_id: int) -> HTMLResponse:
    store: Store = request.app.state.store
    row = store.adapter(adapter_id)  # one it does not hold: the 404 page, by the app's NotFound handler
    norms: dict[str, float] = {}
    chart: Markup | None = None
    problem: str | None = None
    try:
        norms, chart = _norms(str(store.adapter_path(adapter_id)), f"{row.name} v{row.version}: ‖ΔW‖ per module")
    except (StoreError, OSError, ValueError) as exc:  # missing or unreadable files: say so on the page
        problem = str(exc)
    combined: list[tuple[Adapter | None, dict]] = []
    for part in (row.provenance or {}).get("combined", []):
        try:
            combined.append((store.adapter(int(part["adapter_id"])), part))
        except (NotFound, KeyError, TypeError, ValueError):
            combined.append((None, part))
    return page(request, "adapter.html", row=row, chart=chart, norms=norms, problem=problem, combined=combined,
                provenance=json.dumps(row.provenance, indent=1, sort_keys=True, default=str),
                versions=_skill_versions(store, [row]))
