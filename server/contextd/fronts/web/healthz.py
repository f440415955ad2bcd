"""``GET /healthz``: the server's overall health for load balancers that probe over
plain HTTP, the same status the gRPC health service answers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

PATH = "/healthz"
# The overall status by name ("SERVING", "NOT_SERVING", ...), as the health service
# answers it for the server as a whole.
HealthStatus = Callable[[], Awaitable[str]]
_METHODS = ("GET", "HEAD")


def handler(status: HealthStatus) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """200 ``{"status": "SERVING"}`` while serving, 503 with the status otherwise. No
    credential and no CORS: a probe is not a browser page, and the answer tells nothing
    about anyone's data."""

    async def healthz(request: web.Request) -> web.StreamResponse:
        if request.method not in _METHODS:
            return web.Response(status=405, headers={"Allow": ", ".join(_METHODS)})
        name = await status()
        return web.json_response(
            {"status": name},
            status=200 if name == "SERVING" else 503,
            headers={"Cache-Control": "no-store"},
        )

    return healthz
