"""Templates and the filters they share."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")

PAGE_SIZE = 50


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


def pages(total: int, current: int, size: int = PAGE_SIZE) -> dict[str, int]:
    """Where a paged list stands: the page (1-based, clamped), how many there are, the row offset."""
    last = max(1, -(-total // size))
    current = min(max(1, current), last)
    return {"page": current, "last": last, "offset": (current - 1) * size, "total": total}
