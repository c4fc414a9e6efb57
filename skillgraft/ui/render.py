"""Templates and the filters they share."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from skillgraft.skills.errors import NotFound

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")

PAGE_SIZE = 50
T = TypeVar("T")


def _when(value: datetime | str | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        return value.replace("T", " ")[:19]
    return value.strftime("%Y-%m-%d %H:%M:%S")


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


templates.env.filters["when"] = _when
templates.env.filters["pct"] = _pct


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, template, context, status_code=status_code)


def still_stored(get: Callable[[int], T], ids: Iterable[Any]) -> list[T]:
    """The rows a record names that the store still holds (a removed one is left out, not an error)."""
    found = []
    for row_id in ids:
        try:
            found.append(get(int(row_id)))
        except NotFound:
            continue
    return found


def pages(total: int, current: int, size: int = PAGE_SIZE) -> dict[str, int]:
    """Where a paged list stands: the page (1-based, clamped), how many there are, the row offset."""
    last = max(1, -(-total // size))
    current = min(max(1, current), last)
    return {"page": current, "last": last, "offset": (current - 1) * size, "total": total}
