"""The web app: one store, read-only pages, and a token gate when it listens beyond loopback."""
from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from skillgraft.skills.errors import NotFound
from skillgraft.skills.store import Store
from skillgraft.ui import adapters_page, cycleqd_page, sessions_page, skills_page, trajectories_page
from skillgraft.ui.auth import TokenGate
from skillgraft.ui.charts import image, norms_figure
from skillgraft.ui.render import page, templates


def _warm(store: Store, done: threading.Event) -> None:
    """Loads what the first search and the first chart would otherwise wait for: the templates,
    the text encoder, the skills' vectors, the adapter reader (torch), and matplotlib with its
    fonts (one chart drawn)."""
    try:
        for name in templates.env.list_templates():
            templates.env.get_template(name)
        store.retriever.query_vector("warm up")
        store.retriever.refresh()
        import skillgraft.hypernet.peft_io  # noqa: F401

        image(norms_figure({"warm-up": 1.0}, "warm-up"), "")
    except Exception:  # noqa: BLE001 - a page that needs what failed here reports it itself
        pass
    finally:
        done.set()


def build_app(store: Store, token: str | None = None) -> FastAPI:
    """`token`: when given, every request must carry it (see auth.TokenGate). At start a thread
    warms the search and the charts; `app.state.warmed` is set when it is done."""
    warmed = threading.Event()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        threading.Thread(target=_warm, args=(store, warmed), name="skillgraft-ui-warm", daemon=True).start()
        yield

    app = FastAPI(title="skillgraft", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.store, app.state.warmed = store, warmed
    app.mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static")
    for module in (skills_page, adapters_page, trajectories_page, sessions_page, cycleqd_page):
        app.include_router(module.router)

    @app.get("/", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse("/skills")

    @app.exception_handler(404)
    def missing(request: Request, exc: Exception) -> HTMLResponse:
        return page(request, "missing.html", status_code=404, what=f"nothing at {request.url.path}")

    @app.exception_handler(NotFound)
    def not_in_store(request: Request, exc: Exception) -> HTMLResponse:
        return page(request, "missing.html", status_code=404, what=str(exc))

    if token:
        app.add_middleware(TokenGate, token=token)
    return app
