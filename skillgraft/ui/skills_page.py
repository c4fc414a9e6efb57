"""Skills: search, the list, and one skill's versions (lineage, diffs, the runs that taught it, its adapters)."""
from __future__ import annotations

import difflib

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from skillgraft.skills.schema import Adapter, Score, SubjectKind
from skillgraft.skills.store import SkillSummary, Store
from skillgraft.ui.charts import lineage_svg
from skillgraft.ui.render import PAGE_SIZE, page, pages

router = APIRouter()


@router.get("/skills", response_class=HTMLResponse)
def skills(request: Request, q: str = "", number: int = Query(1, alias="page")) -> HTMLResponse:
    store: Store = request.app.state.store
    rows: list[tuple[SkillSummary, float | None]]  # a skill, and how well it matched the search
    if q.strip():
        hits = store.search(q, k=PAGE_SIZE)
        summaries = {s.name: s for s in store.skill_summaries([h.skill_name for h in hits])}
        rows = [(summaries[h.skill_name], h.score) for h in hits if h.skill_name in summaries]
        return page(request, "skills.html", q=q, rows=rows, paging=None)
    asked = (max(number, 1) - 1) * PAGE_SIZE
    total, names = store.skill_names(asked, PAGE_SIZE)
    paging = pages(total, number)
    if paging["offset"] != asked:  # past the last page: show the last
        names = store.skill_names(paging["offset"], PAGE_SIZE)[1]
    rows = [(summary, None) for summary in sorted(store.skill_summaries(names), key=lambda s: s.name)]
    return page(request, "skills.html", q=q, rows=rows, paging=paging)


def _diff(a_text: str, b_text: str, a_label: str, b_label: str) -> Markup:
    table = difflib.HtmlDiff(tabsize=4, wrapcolumn=72).make_table(
        a_text.splitlines(), b_text.splitlines(), a_label, b_label, context=True, numlines=3)
    return Markup(table)


@router.get("/skills/{name}", response_class=HTMLResponse)
def skill(request: Request, name: str, a: int | None = None, b: int | None = None) -> HTMLResponse:
    store: Store = request.app.state.store
    versions = store.versions(name)
    if not versions:
        return page(request, "missing.html", status_code=404, what=f"no skill named {name!r}")
    by_number = {v.number: v for v in versions}
    newest = versions[-1]
    parent = next((v for v in versions if v.id == newest.parent_id), versions[0])
    left = by_number.get(a if a is not None else parent.number, parent)
    right = by_number.get(b if b is not None else newest.number, newest)
    ids = [v.id for v in versions if v.id is not None]
    adapters: dict[int | None, list[Adapter]] = {}
    for adapter in store.adapters(skill_version_ids=ids):
        adapters.setdefault(adapter.skill_version_id, []).append(adapter)
    scores: dict[int, list[Score]] = {}
    for score in store.scores(SubjectKind.skill_version, ids):
        scores.setdefault(score.subject_id, []).append(score)
    return page(request, "skill.html", name=name, versions=versions, lineage=lineage_svg(versions),
                left=left, right=right, diff=_diff(left.text, right.text, f"v{left.number}", f"v{right.number}"),
                adapters=adapters, scores=scores)
