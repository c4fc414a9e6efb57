"""The token a server bound beyond loopback asks of every request.

A browser brings it once in the address (`?token=…`) and gets it back as a cookie; scripts send
`Authorization: Bearer …`. Anything else is answered 401.
"""
from __future__ import annotations

import hmac
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "skillgraft_token"


class TokenGate:
    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token

    def _matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        bearer = request.headers.get("authorization", "")
        if self._matches(request.cookies.get(COOKIE)) or (bearer.startswith("Bearer ") and self._matches(bearer[7:])):
            await self.app(scope, receive, send)
            return
        response: Response
        if self._matches(request.query_params.get("token")):
            # Drop the token from the address the person goes on with, and keep it as a cookie.
            query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            response = RedirectResponse(request.url.path + (f"?{query}" if query else ""), status_code=303)
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
        else:
            response = PlainTextResponse("401: this skillgraft ui needs its token; open the address "
                                         "`skillgraft ui` printed at start (…/?token=…).", status_code=401)
        await response(scope, receive, send)
