"""`skillgraft ui`: the store as web pages, on this machine's loopback unless told otherwise."""
from __future__ import annotations

import ipaddress
from typing import Optional

import typer

from skillgraft.commands.common import HomeOption, StoreOption, console, fail, settings_from

TOKEN_ENV = "SKILLGRAFT_UI_TOKEN"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def register(app: typer.Typer) -> None:
    @app.command()
    def ui(
        host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; anything but loopback needs --token."),
        port: int = typer.Option(8765, "--port", min=1, max=65535, help="Port to listen on."),
        token: Optional[str] = typer.Option(None, "--token", envvar=TOKEN_ENV, show_envvar=True,
                                            help="Every request must carry it (the printed address sets it as a cookie)."),
        home: Optional[str] = HomeOption,
        store: Optional[str] = StoreOption,
    ) -> None:
        """Browse the store in a web browser: skills and their versions, the global adapter's history,
        runs step by step, learning curves and CycleQD archives. Read-only.

        Listens on 127.0.0.1:8765 by default. To listen on another address, give a token
        (--token or $SKILLGRAFT_UI_TOKEN); every request without it is refused with 401.
        """
        from skillgraft.commands.store import open_store
        from skillgraft.ui import build_app
        from skillgraft.ui.serve import serve

        if not _loopback(host) and not token:
            raise fail(f"listening on {host} needs a token: give --token or set {TOKEN_ENV}", code=2)
        opened = open_store(home, store)
        try:
            opened.skill_names(0, 1)  # a store that cannot be read fails here, once, not on every page
        except Exception as exc:  # noqa: BLE001 - any driver error means the same to a person
            raise fail(f"cannot read the store at {settings_from(home, store).store_url}: {exc}", code=2) from exc
        address = f"http://{host}:{port}/" + (f"?token={token}" if token else "")
        console.print(f"skillgraft ui on [bold]{address}[/] (Ctrl-C stops it)")
        serve(build_app(opened, token=token), host, port)
