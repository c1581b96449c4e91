"""A page of a local web app as headless Chromium renders it, logged in through the app's
Django login form: the session cookie goes to Chromium through the DevTools protocol, the page
is polled until it has drawn (bounded), then its text, loaded images, radio buttons (single
choices) and a screenshot."""

from __future__ import annotations

import base64
import itertools
import json
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1800",
]
PROBE = """(() => {
  const images = [...document.images].filter(i => i.complete && i.naturalWidth > 0 && !i.src.startsWith('data:'));
  return JSON.stringify({text: document.body ? document.body.innerText : '', images_loaded: images.length,
                         radios: document.querySelectorAll('input[type=radio]').length});
})()"""


def session_cookie(base: str, email: str, password: str) -> dict[str, str]:
    """The cookies of a logged-in session (Django's login form, with its CSRF token)."""
    with httpx.Client(base_url=base, timeout=60, follow_redirects=True) as client:
        form = client.get("/user/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert token, form.text[:500]
        client.post(
            "/user/login/",
            data={"csrfmiddlewaretoken": token.group(1), "email": email, "password": password},
            headers={"Referer": f"{base}/user/login/"},
        )
        cookies = dict(client.cookies)
    assert "sessionid" in cookies, "login failed"
    return cookies


def logged_in_page(
    chromium: Path,
    base: str,
    email: str,
    password: str,
    path: str,
    work: Path,
    ready: str = "Does the sentence",
    seconds: float = 120.0,
) -> dict[str, Any]:
    cookies = session_cookie(base, email, password)
    port_file = Path(tempfile.mkdtemp(dir=work)) / "profile"
    browser = subprocess.Popen(
        [str(chromium), *FLAGS, "--remote-debugging-port=0", f"--user-data-dir={port_file}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        active = port_file / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not active.is_file() or not active.read_text().strip():
            assert time.monotonic() < deadline and browser.poll() is None, "Chromium did not start"
            time.sleep(0.2)
        port = active.read_text().split()[0]
        pages = [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json() if t["type"] == "page"]
        ids = itertools.count(1)
        with connect(pages[0]["webSocketDebuggerUrl"], max_size=None) as ws:

            def call(method: str, **params: Any) -> dict:
                number = next(ids)
                ws.send(json.dumps({"id": number, "method": method, "params": params}))
                while True:
                    reply = json.loads(ws.recv())
                    if reply.get("id") == number:
                        return reply.get("result", {})

            call("Network.enable")
            for name, value in cookies.items():
                call("Network.setCookie", name=name, value=value, url=base)
            call("Page.enable")
            call("Page.navigate", url=base + path)
            deadline = time.monotonic() + seconds
            seen: dict[str, Any] = {}
            while time.monotonic() < deadline:
                seen = json.loads(call("Runtime.evaluate", expression=PROBE)["result"]["value"])
                if ready in seen["text"] and seen["images_loaded"]:
                    break
                time.sleep(1.0)
            shot = work / "page.png"
            shot.write_bytes(base64.b64decode(call("Page.captureScreenshot", format="png")["data"]))
            return {**seen, "screenshot": shot}
    finally:
        browser.kill()
        browser.wait()
