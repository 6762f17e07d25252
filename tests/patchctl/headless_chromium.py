"""A headless Chromium for the tests, driven over the DevTools protocol on a pipe.

Debian's `chromium` (the package `.ci/run` installs) is started with `--remote-debugging-pipe`:
the protocol's JSON messages, each ended by a NUL byte, go in on the child's fd 3 and come back
on its fd 4. No driver, no port, nothing from outside the package registries. The tests use it
to open a page, note every request the page made (the protocol's `Network.requestWillBeSent`,
which the page's own target reports, unlike the browser's background traffic), find an
element's box, and take a screenshot of the viewport.

Whatever the browser itself would fetch (component updates, the network time) goes to a proxy
that nothing listens on: a test never reaches the network through it.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("chromium", "chromium-browser", "google-chrome")
REQUIRE_ENV = "PATCHCTL_REQUIRE_BROWSER"
TIMEOUT_S = 30.0
# Port 9 (discard) on the loopback: the connection is refused, so nothing leaves the machine.
DEAD_PROXY = "http://127.0.0.1:9"


def find_chromium() -> str | None:
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    pass


@dataclass
class Box:
    """An element's border box in CSS pixels (the screenshot's pixels at a scale factor of 1)."""

    left: int
    top: int
    right: int
    bottom: int


@dataclass
class Visit:
    screenshot: bytes  # PNG of the viewport
    requests: list[str] = field(default_factory=list)  # every URL the page asked for, in order
    boxes: dict[str, Box | None] = field(default_factory=dict)  # CSS selector -> its first element's box
    value: object = None  # what the expression `visit` was given evaluated to in the page (JSON)


class Chromium:
    """One headless browser for a `with` block; `visit` opens a page in a fresh tab."""

    def __init__(self, binary: str, profile: Path, width: int = 1200, height: int = 1000):
        self.width, self.height = width, height
        to_child, self._to_browser = os.pipe()
        self._from_browser, from_child = os.pipe()

        def wire_pipes() -> None:  # in the child, before exec: the protocol's fds 3 and 4
            os.dup2(to_child, 3)
            os.dup2(from_child, 4)

        self._process = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",  # root in a container has no user namespaces for the sandbox
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                f"--proxy-server={DEAD_PROXY}",
                "--proxy-bypass-list=<-loopback>",  # the loopback too: a page's request to it is refused
                "--disable-gpu",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=wire_pipes,
        )
        os.close(to_child)
        os.close(from_child)
        self._next_id = 0
        self._buffer = b""
        self._events: list[dict] = []

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._call("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass

    # ------------------------------------------------------------------ the protocol

    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._next_id += 1
        message: dict = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise BrowserError("chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError(f"chromium closed its pipe (exit {self._process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        wanted = self._send(method, params, session)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            message = self._receive(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._events.append(message)

    def _wait_for(self, method: str, session: str) -> dict:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            for i, event in enumerate(self._events):
                if event.get("method") == method and event.get("sessionId") == session:
                    return self._events.pop(i)
            self._events.append(self._receive(deadline))

    # ------------------------------------------------------------------ a page

    def visit(
        self, url: str, selectors: tuple[str, ...] = (), *, evaluate: str | None = None, full_page: bool = False
    ) -> Visit:
        """Open URL in a fresh tab, wait for its load event, and take the viewport's screenshot
        (FULL_PAGE: the whole page's); note every request the page made, the box of each
        selector's first element, and what the expression EVALUATE gives there (by the
        protocol: the page itself runs no script)."""
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            self._events.clear()
            self._call(
                "Emulation.setDeviceMetricsOverride",
                {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
                session,
            )
            self._call("Network.enable", {}, session)
            self._call("Page.enable", {}, session)
            self._call("Page.navigate", {"url": url}, session)
            self._wait_for("Page.loadEventFired", session)
            root = self._call("DOM.getDocument", {}, session)["root"]["nodeId"]
            boxes = {selector: self._box(root, selector, session) for selector in selectors}
            value = None
            if evaluate is not None:
                found = self._call("Runtime.evaluate", {"expression": evaluate, "returnByValue": True}, session)
                if "exceptionDetails" in found:
                    raise BrowserError(f"evaluating in the page: {found['exceptionDetails'].get('text')}")
                value = found["result"].get("value")
            shot: dict = {"format": "png"}
            if full_page:
                size = self._call("Page.getLayoutMetrics", {}, session)["cssContentSize"]
                clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
                shot.update(captureBeyondViewport=True, clip=clip)
            png = self._call("Page.captureScreenshot", shot, session)["data"]
            requests = [
                event["params"]["request"]["url"]
                for event in self._events
                if event.get("method") == "Network.requestWillBeSent" and event.get("sessionId") == session
            ]
            return Visit(base64.b64decode(png), requests, boxes, value)
        finally:
            self._call("Target.closeTarget", {"targetId": target})

    def _box(self, root: int, selector: str, session: str) -> Box | None:
        node = self._call("DOM.querySelector", {"nodeId": root, "selector": selector}, session)["nodeId"]
        if not node:
            return None
        quad = self._call("DOM.getBoxModel", {"nodeId": node}, session)["model"]["border"]
        xs, ys = quad[0::2], quad[1::2]
        return Box(round(min(xs)), round(min(ys)), round(max(xs)), round(max(ys)))
