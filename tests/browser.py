"""Headless chromium driven over the DevTools protocol, for pages that draw themselves with
JavaScript (the Prefect UI): the text a page shows once its scripts have run, the natural width
of each of its images as the browser decoded them, and a screenshot."""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

from tests.conftest import free_port, skip_outside_ci

WINDOW = (1400, 1000)


@dataclass(frozen=True)
class Shown:
    """What a page showed: its text and, per image, the start of its source and its natural
    width (0: the browser could not draw it)."""

    text: str
    images: list[tuple[str, int]]


class Tab:
    """One page of a running chromium, over its DevTools websocket."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket, self._ids = socket, itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command; its result (events in between are dropped)."""
        sent = next(self._ids)
        self._socket.send(json.dumps({"id": sent, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv(timeout=60))
            if message.get("id") == sent:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def show(self, url: str, until: str, timeout: float = 90,
             screenshot: Path | None = None) -> Shown:
        """Open `url` and wait until its text contains `until` (or says something went wrong,
        or `timeout` s pass) and its images have loaded; what it shows then."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while True:
            text = self.evaluate("document.body ? document.body.innerText : ''") or ""
            loaded = self.evaluate("Array.from(document.images).every(i => i.complete)")
            if (until in text and loaded) or "Something went wrong" in text \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        images = self.evaluate(
            "Array.from(document.images).map(i => [i.src.slice(0, 40), i.naturalWidth])")
        if screenshot is not None:
            data = self.call("Page.captureScreenshot", format="png")["data"]
            screenshot.write_bytes(base64.b64decode(data))
        return Shown(text, [(src, width) for src, width in images])


@contextmanager
def chromium(profile: Path) -> Iterator[Tab]:
    """A headless chromium (skipped where there is none, except under CI=true) and its tab."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        skip_outside_ci("chromium not found (apt-get install chromium; .ci/run installs it)")
    port = free_port()
    proc = subprocess.Popen(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--remote-debugging-port={port}", "--remote-allow-origins=*",
         f"--user-data-dir={profile}", f"--window-size={WINDOW[0]},{WINDOW[1]}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        page = _page_socket(port, proc)
        with connect(page, max_size=None) as socket:
            yield Tab(socket)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _page_socket(port: int, proc: subprocess.Popen, timeout: float = 60) -> str:
    """The DevTools websocket URL of the browser's page, once it answers."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                pages = [t for t in json.load(r) if t["type"] == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"chromium did not open its DevTools port {port} "
                               f"(exit {proc.poll()})")
        time.sleep(0.2)
