"""The ASGI app of `mam web`: the page, its state as JSON, its live events, and its actions.

`build_app()` is the one way to make it, from a workspace, its settings and where it is served;
`mam web` serves it and a node can host the same object.

Routes (all behind `auth.Guard`):
  GET  /                           the page (HTML; its script and style at /app.js, /app.css)
  GET  /login                      the same page: its script starts a login with the link's code (POST /login,
                                   answered by the guard itself)
  GET  /api/state                  what the page shows, read now (`state.state_json`)
  GET  /api/events                 server-sent events: `state` (the whole state, when it changed),
                                   `line` (a `mam tail --json` line), `note` (the broker came or went)
  GET  /api/sessions/NAME/screen   the session's recent screen, read-only, control sequences removed
  POST /api/SUBJECT/ID/ACTION      an action of `actions.ACTIONS` (cancel a job, approve a loop, allow or deny
                                   a session's permission prompt), asked on the page first; its body is the
                                   action's JSON (the tool a prompt is for)
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from mam.errors import JobNotFound, MamError, SessionNotFound
from mam.settings import Settings
from mam.util.hosts import allowed_hosts
from mam.web import actions, page
from mam.web.auth import Guard, Logins
from mam.web.live import Live
from mam.workspace import Workspace

MISSING = frozenset({"JobNotFound", "SessionNotFound"})  # what an action run by the node names (mam.errors.Refused)
KEEPALIVE_S = 15.0
MAX_BODY = 64 << 10  # an action's body: what the person saw (a tool call), never large
NO_STORE = {"cache-control": "no-store"}
HEADERS = {
    **NO_STORE,
    "content-security-policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


def _json(body: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(body, ensure_ascii=False, default=str),
        status_code=status,
        media_type="application/json",
        headers=NO_STORE,
    )


def _user() -> str:
    """Who serves the page (the token is theirs): user@host, as `mam loop approve` records who approved."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = "unknown"
    return f"{name}@{socket.gethostname()}"


def build_app(
    ws: Workspace, settings: Settings, *, logins: Logins, host: str, port: int, tls: bool = False
) -> tuple[Any, Live]:
    """(the guarded ASGI app, its live state). `logins`: who may use it (mam.web.auth)."""
    live = Live(ws, settings)
    user = _user()

    async def index(_request: Request) -> Response:
        return HTMLResponse(page.HTML, headers=HEADERS)

    async def script(_request: Request) -> Response:
        return Response(page.SCRIPT, media_type="text/javascript", headers=HEADERS)

    async def style(_request: Request) -> Response:
        return Response(page.STYLE, media_type="text/css", headers=HEADERS)

    async def state(_request: Request) -> Response:
        return _json(await run_in_threadpool(live.fresh))

    async def events(request: Request) -> Response:
        queue = live.subscribe()

        async def stream() -> AsyncIterator[str]:
            try:
                current = live.current or await run_in_threadpool(live.fresh)
                yield f"event: state\ndata: {json.dumps(current, ensure_ascii=False, default=str)}\n\n"
                while True:
                    try:
                        kind, data = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                    except asyncio.TimeoutError:
                        yield ": keepalive\n\n"
                        continue
                    yield f"event: {kind}\ndata: {data}\n\n"
            finally:
                live.unsubscribe(queue)

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={**NO_STORE, "x-accel-buffering": "no"}
        )

    async def screen(request: Request) -> Response:
        from mam.sessions.screen import recent_screen

        name = request.path_params["name"]
        try:
            text = await run_in_threadpool(recent_screen, name, ws=ws, settings=live.settings)
        except MamError as e:
            return _json(
                {"error": str(e), "exit_code": int(e.exit_code)}, 404 if isinstance(e, SessionNotFound) else 400
            )
        return _json({"name": name, "screen": text})

    async def act(request: Request) -> Response:
        subject, ident, name = (request.path_params[k] for k in ("subject", "ident", "action"))
        action = actions.find(subject, name)
        if action is None:
            return _json({"error": f"no action {name!r} on a {subject}"}, 404)
        raw = await request.body()
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError:
            body = None
        if not isinstance(body, dict) or len(raw) > MAX_BODY:
            return _json({"error": "the body must be a JSON object"}, 400)
        by = {"user": user, "via": "web", "from": request.client.host if request.client else ""}
        try:
            result = await run_in_threadpool(action.run, ws, live.settings, ident, actions.Asked(body, by))
        except MamError as e:
            missing = isinstance(e, (JobNotFound, SessionNotFound)) or getattr(e, "kind", "") in MISSING
            return _json({"error": str(e), "exit_code": int(e.exit_code)}, 404 if missing else 409)
        live.poke.set()
        return _json({"ok": True, "result": result})

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        live.start(asyncio.get_running_loop())
        try:
            yield
        finally:
            live.close()

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/login", index),
            Route("/app.js", script),
            Route("/app.css", style),
            Route("/api/state", state),
            Route("/api/events", events),
            Route("/api/sessions/{name}/screen", screen),
            Route("/api/{subject}/{ident}/{action}", act, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    guarded = Guard(app, logins, allowed_hosts(host, port, tls=bool(tls)), "https" if tls else "http")
    return guarded, live
