"""A static HTML file as headless Chromium renders it, read through the DevTools protocol: the
console errors and uncaught exceptions it raised, the answer of a DOM probe (a JavaScript
expression returning JSON) once the document has loaded, and a full-page screenshot kept in
``artifacts`` (pytest keeps its temporary folders after the run)."""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1600",
]
STARTUP = 60.0  # seconds Chromium may take to start, bounded (a deadline, not a timing window)


@dataclass
class Rendered:
    errors: list[str]  # console errors, failed loads and uncaught exceptions
    probe: Any  # what the probe expression returned (parsed JSON)
    screenshot: Path


def render(page: Path, probe: str, artifacts: Path) -> Rendered:
    """Open ``page`` (a file) in headless Chromium, wait for its load event, run ``probe`` (an
    expression evaluating to a JSON string) and screenshot the whole page into ``artifacts``."""
    artifacts.mkdir(parents=True, exist_ok=True)
    profile = Path(tempfile.mkdtemp(prefix="chromium-", dir=artifacts))
    browser = subprocess.Popen(
        [str(CHROMIUM), *FLAGS, "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        active = profile / "DevToolsActivePort"
        deadline = time.monotonic() + STARTUP
        while not active.is_file() or not active.read_text().strip():
            assert time.monotonic() < deadline and browser.poll() is None, "Chromium did not start"
            time.sleep(0.2)
        port = active.read_text().split()[0]
        target = next(t for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json() if t["type"] == "page")
        ids = itertools.count(1)
        errors: list[str] = []
        with connect(target["webSocketDebuggerUrl"], max_size=None) as ws:

            def wait(number: int | None = None, event: str | None = None) -> dict:
                """Read messages until the reply to ``number`` or the event ``event``, noting errors."""
                while True:
                    message = json.loads(ws.recv(timeout=STARTUP))
                    method = message.get("method")
                    params = message.get("params", {})
                    if method == "Runtime.exceptionThrown":
                        errors.append(params["exceptionDetails"].get("text", "exception"))
                    elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                        errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
                    elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                        errors.append(params["entry"].get("text", "error"))
                    if number is not None and message.get("id") == number:
                        return message.get("result", {})
                    if event is not None and method == event:
                        return params

            def call(method: str, **params: Any) -> dict:
                number = next(ids)
                ws.send(json.dumps({"id": number, "method": method, "params": params}))
                return wait(number=number)

            for domain in ("Page", "Runtime", "Log"):
                call(f"{domain}.enable")
            number = next(ids)
            ws.send(json.dumps({"id": number, "method": "Page.navigate", "params": {"url": page.resolve().as_uri()}}))
            wait(event="Page.loadEventFired")
            answer = call("Runtime.evaluate", expression=probe, returnByValue=True)["result"]["value"]
            metrics = call("Page.getLayoutMetrics")["cssContentSize"]
            shot = artifacts / f"{page.stem}.png"
            shot.write_bytes(
                base64.b64decode(
                    call(
                        "Page.captureScreenshot",
                        format="png",
                        captureBeyondViewport=True,
                        clip={"x": 0, "y": 0, "width": metrics["width"], "height": metrics["height"], "scale": 1},
                    )["data"]
                )
            )
            return Rendered(errors, json.loads(answer), shot)
    finally:
        browser.kill()
        browser.wait()
