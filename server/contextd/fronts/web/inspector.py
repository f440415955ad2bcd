"""``/inspect``: the context inspector, a browser app served from the web port.

The files are built from inspect/ (TypeScript) and ship in the package; serving them
needs no Node. The page holds no data of its own: every call it makes goes through the
Connect API of this same port with the credential the person typed in, so the native
server decides what it may read, as for any other client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cache
from importlib import resources

from aiohttp import web

PATH = "/inspect"
_ASSETS = "inspector_assets"
_FILES = {
    "": ("index.html", "text/html; charset=utf-8"),
    "app.js": ("app.js", "text/javascript; charset=utf-8"),
    "app.css": ("app.css", "text/css; charset=utf-8"),
}
_METHODS = ("GET", "HEAD")
# Only this origin's scripts, styles and calls; no frames, no forms, no plug-ins.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    # The files change with the server's version; a reload asks again.
    "Cache-Control": "no-cache",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@cache
def _read(name: str) -> bytes:
    return resources.files("contextd.fronts.web").joinpath(_ASSETS, name).read_bytes()


def routes() -> list[web.RouteDef]:
    """``/inspect`` (redirects to ``/inspect/``), the page and its two files; any other
    path under it answers 404, any method but GET and HEAD 405."""
    return [
        web.route("*", PATH, _redirect),
        web.route("*", PATH + "/{name:.*}", _file),
    ]


def _refused_method(request: web.Request) -> web.Response | None:
    if request.method in _METHODS:
        return None
    return web.Response(status=405, headers={"Allow": ", ".join(_METHODS)})


async def _redirect(request: web.Request) -> web.StreamResponse:
    refused = _refused_method(request)
    if refused is not None:
        return refused
    raise web.HTTPPermanentRedirect(PATH + "/")


async def _file(request: web.Request) -> web.StreamResponse:
    refused = _refused_method(request)
    if refused is not None:
        return refused
    found = _FILES.get(request.match_info["name"])
    if found is None:
        return web.Response(status=404, text="not found\n", headers=HEADERS)
    name, content_type = found
    return web.Response(body=_read(name), headers={**HEADERS, "Content-Type": content_type})
