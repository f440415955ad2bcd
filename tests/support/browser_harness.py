"""Runs the add-in page of tests/browser/ in headless Chromium and returns what it saw.

The page is served over HTTPS (as Office requires of add-ins) from a local origin of its
own, so every call to contextd's web port is cross-origin and goes through CORS. The
Playwright driver (tests/browser/dist/drive.mjs) prints each page's report as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.support.paths import ROOT

HARNESS = ROOT / "tests" / "browser"
CHROMIUM = Path("/usr/bin/chromium")
DRIVER = HARNESS / "dist" / "drive.mjs"
BUNDLE = HARNESS / "dist" / "taskpane.js"
PAGE = HARNESS / "taskpane.html"
PAGE_TIMEOUT_S = 60


def require_browser() -> None:
    """Fails under CI (which installs everything), skips elsewhere, if a piece is missing."""
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (Debian package chromium; .ci/run installs it)")
    if shutil.which("node") is None:
        missing.append("node")
    if shutil.which("openssl") is None:
        missing.append("openssl (for the page server's certificate)")
    if not (DRIVER.exists() and BUNDLE.exists()):
        missing.append("the built page (`make test` builds it: npm ci and npm run build)")
    if missing:
        message = "browser test needs " + ", ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def localhost_tls(directory: Path) -> ssl.SSLContext:
    """A server context with a self-signed certificate for ``localhost``."""
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=DNS:localhost"),
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


@asynccontextmanager
async def page_server(tls: ssl.SSLContext) -> AsyncIterator[str]:
    """Serves the task pane at ``https://localhost:<free port>``; yields that origin."""

    files = {"/taskpane.html": PAGE, "/dist/taskpane.js": BUNDLE}

    async def file(request: web.Request) -> web.FileResponse:
        return web.FileResponse(files[request.path])

    app = web.Application()
    for path in files:
        app.router.add_get(path, file)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        await web.SockSite(runner, sock, ssl_context=tls).start()
        yield f"https://localhost:{sock.getsockname()[1]}"
    finally:
        await runner.cleanup()
        sock.close()


@dataclass(frozen=True)
class PageVisit:
    """A page to open: its scenario, the page's origin, contextd's web port, the user, and
    the bearer token the page sends (in the URL's fragment, which no server receives)."""

    scenario: str
    origin: str
    endpoint: str
    user: str
    token: str = ""

    @property
    def url(self) -> str:
        query = f"scenario={self.scenario}&endpoint=http://{self.endpoint}&user={self.user}"
        fragment = f"#token={self.token}" if self.token else ""
        return f"{self.origin}/taskpane.html?{query}{fragment}"


@dataclass(frozen=True)
class PageResult:
    """The page's report (``window.contextdReport``) and its cross-origin requests."""

    report: dict[str, Any]
    network: list[dict[str, Any]]
    console: list[str]

    def calls(self, method: str) -> list[dict[str, Any]]:
        """Recorded calls of one RPC, e.g. ``ContextService/CountTokens``, in order."""
        return [c for c in self.report["calls"] if c["method"] == f"/contextd.v1.{method}"]

    def call(self, method: str) -> dict[str, Any]:
        [only] = self.calls(method)
        return only

    def requests(self, kind: str) -> list[dict[str, Any]]:
        """Cross-origin requests of one CDP resource type: ``Preflight`` or ``Fetch``."""
        return [r for r in self.network if r["type"] == kind]


async def run_pages(visits: dict[str, PageVisit]) -> dict[str, PageResult]:
    """Opens each page in one headless Chromium, in order, until its report is done."""
    config = {
        "chromium": str(CHROMIUM),
        "timeoutMs": PAGE_TIMEOUT_S * 1000,
        "pages": [{"name": name, "url": visit.url} for name, visit in visits.items()],
    }
    driver = await asyncio.create_subprocess_exec(
        "node",
        str(DRIVER),
        json.dumps(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(
            driver.communicate(), timeout=PAGE_TIMEOUT_S * len(visits) + 30
        )
    finally:
        if driver.returncode is None:
            driver.kill()
            await driver.wait()
    assert driver.returncode == 0, f"the browser driver failed:\n{err.decode()}"
    return {
        page["name"]: PageResult(page["report"], page["network"], page["console"])
        for page in json.loads(out)
    }
