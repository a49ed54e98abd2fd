"""The dashboard's routes on the collector's aiohttp application (docs/dashboard.md), under its prefix:
`/` overview, `/agents`, `/target/AGENT_ID/TARGET_ID?days=N`. GET and HEAD only (405 otherwise),
HTTP Basic with a viewer's name and secret (401 otherwise), nothing written by any page."""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from netprobe.collector.tokens import Viewers
from netprobe.dashboard.agents import agents_page
from netprobe.dashboard.layout import DEFAULT_DAYS, MAX_DAYS, MIN_DAYS, e, page
from netprobe.dashboard.overview import PeakSnapshot, overview_page
from netprobe.dashboard.target import target_page
from netprobe.errors import StorageError
from netprobe.logs import log_event
from netprobe.store import Store
from netprobe.times import utc_now

log = logging.getLogger("netprobe.dashboard")

CHALLENGE = 'Basic realm="netprobe dashboard", charset="UTF-8"'
# Inline style only, nothing fetched from anywhere (the images are inline SVG), no scripts, no framing.
HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                                      "frame-ancestors 'none'; form-action 'none'; base-uri 'none'",
           "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
_DAYS = re.compile(r"[0-9]{1,3}")


class BadRequest(Exception):
    """Answered 400 with the message."""


@dataclass(frozen=True, slots=True)
class Dashboard:
    store: Store
    viewers: Viewers
    prefix: str          # starts and ends with "/"
    snapshot: PeakSnapshot | None = None     # the overview's rows, recomputed in the background


DASHBOARD = web.AppKey("dashboard", Dashboard)
View = Callable[[Dashboard, web.Request], Awaitable[tuple[str, str, str] | None]]


def add_dashboard(app: web.Application, dashboard: Dashboard) -> None:
    app[DASHBOARD] = dashboard
    p = dashboard.prefix
    app.router.add_route("*", p, _handler(_overview))
    app.router.add_route("*", p + "agents", _handler(_agents))
    app.router.add_route("*", p + "target/{agent}/{target}", _handler(_target))


def days_of(request: web.Request) -> int:
    """?days=N, 1…90 (absent: 7)."""
    given = request.query.getall("days", [])
    if not given:
        return DEFAULT_DAYS
    if len(given) > 1:
        raise BadRequest(f"days: give it once, got {len(given)} values")
    text = given[0]
    if not _DAYS.fullmatch(text) or not MIN_DAYS <= int(text) <= MAX_DAYS:
        raise BadRequest(f"days: expected a whole number of days from {MIN_DAYS} to {MAX_DAYS}, "
                         f"got {text[:40]!r}")
    return int(text)


async def _overview(d: Dashboard, request: web.Request) -> tuple[str, str, str]:
    title, body = await overview_page(d.store, d.prefix, utc_now(), d.snapshot)
    return title, body, "overview"


async def _agents(d: Dashboard, request: web.Request) -> tuple[str, str, str]:
    title, body = await agents_page(d.store, utc_now())
    return title, body, "agents"


async def _target(d: Dashboard, request: web.Request) -> tuple[str, str, str] | None:
    days = days_of(request)
    agent, target = request.match_info["agent"], request.match_info["target"]
    got = await target_page(d.store, agent, target, days, d.prefix)
    return None if got is None else (*got, "")


def _handler(view: View) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        d = request.app[DASHBOARD]
        if request.method not in ("GET", "HEAD"):
            return _message(d, 405, "Method not allowed", "The dashboard only reads: GET or HEAD.",
                            {"Allow": "GET, HEAD"})
        try:
            if not await _authorised(d, request):
                return _message(d, 401, "Unauthorized", "Log in with a viewer's name and secret "
                                "(`netprobe collector add-viewer NAME --config FILE` prints the secret).",
                                {"WWW-Authenticate": CHALLENGE})
            got = await view(d, request)
        except BadRequest as exc:
            return _message(d, 400, "Bad request", str(exc))
        except StorageError as exc:
            log_event(log, "error", "dashboard: database unavailable", path=request.path, error=str(exc))
            return _message(d, 503, "Database unavailable", "The database did not answer; try again shortly.",
                            {"Retry-After": "5"})
        if got is None:
            return _message(d, 404, "Not found", "No such agent or target on record.")
        title, body, here = got
        return web.Response(text=page(title, body, d.prefix, here), content_type="text/html",
                            charset="utf-8", headers=HEADERS)

    return handle


async def _authorised(d: Dashboard, request: web.Request) -> bool:
    scheme, _, value = request.headers.get("Authorization", "").strip().partition(" ")
    if scheme.lower() != "basic" or not value.strip():
        return False
    try:
        text = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    name, sep, secret = text.partition(":")
    return bool(sep) and await d.viewers.authenticate(name, secret)


def _message(d: Dashboard, status: int, title: str, text: str,
             headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, text=page(title, f"<h1>{e(title)}</h1><p>{e(text)}</p>", d.prefix, ""),
                        content_type="text/html", charset="utf-8", headers={**HEADERS, **(headers or {})})
