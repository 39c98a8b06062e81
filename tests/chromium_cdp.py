"""Drive real headless Chromium over the DevTools protocol (``--remote-debugging-pipe``), for page tests.

The pipe (Chromium reads commands on fd 3 and writes replies on fd 4, each message JSON ended by a NUL byte)
needs no network port and no WebSocket library. :class:`Page` loads a file, evaluates expressions, sends
real mouse-wheel and drag input, captures screenshots, and collects console messages and uncaught exceptions.

Example::

    with Page.open(path, tmp_path) as page:
        assert page.eval("document.title") == "report"
        page.wheel(400, 300, -500)
        page.screenshot(tmp_path / "shot.png")
        assert page.errors == []
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]


class Page:
    """One Chromium process with one page, driven over the DevTools pipe."""

    def __init__(self, profile: Path, width: int, height: int) -> None:
        assert CHROMIUM is not None
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        high_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)  # out of the way of fds 3 and 4 in the child
        high_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
        os.close(to_chrome_r)
        os.close(from_chrome_w)

        def child() -> None:
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=child,
        )
        os.close(high_r)
        os.close(high_w)
        self.send_fd, self.recv_fd = to_chrome_w, from_chrome_r
        self.buffer = b""
        self.next_id = 0
        self.session: str | None = None
        self.errors: list[str] = []  # console errors and uncaught exceptions
        self.console: list[str] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Page", "Log"):
            self.call(f"{domain}.enable")
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.call("Emulation.setDeviceMetricsOverride", metrics)

    @classmethod
    def open(cls, path: Path, tmp: Path, width: int = 1280, height: int = 900) -> Page:
        page = cls(tmp / f"profile-{time.monotonic_ns()}", width, height)
        try:
            page.navigate(path.resolve().as_uri())
        except BaseException:
            page.close()
            raise
        return page

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        for fd in (self.send_fd, self.recv_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    # -- protocol -----------------------------------------------------------------------------------------
    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.recv_fd], [], [], left)[0]:
                raise TimeoutError("no reply from Chromium")
            chunk = os.read(self.recv_fd, 1 << 20)
            if not chunk:
                raise EOFError("Chromium closed the DevTools pipe")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(line)

    def _event(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append(str(details.get("exception", {}).get("description") or details.get("text")))
        elif method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.console.append(f"{params.get('type')}: {text}")
            if params.get("type") in ("error", "assert"):
                self.errors.append(text)
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self.console.append(f"{entry.get('level')}: {entry.get('text')}")
            if entry.get("level") == "error":
                self.errors.append(str(entry.get("text")))

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session is not None:
            msg["sessionId"] = self.session
        os.write(self.send_fd, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read(timeout)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    # -- page ---------------------------------------------------------------------------------------------
    def navigate(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete' && document.body && document.body.dataset.ready === '1'")

    def eval(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not self.eval(f"!!({expression})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"page never satisfied {expression}")
            time.sleep(0.05)

    def wheel(self, x: float, y: float, delta_y: float) -> None:
        self.call("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": x, "y": y, "deltaX": 0, "deltaY": delta_y})
        self.eval("new Promise(r => requestAnimationFrame(() => r(1)))")

    def drag(self, x0: float, y0: float, x1: float, y1: float) -> None:
        left = {"button": "left", "clickCount": 1}
        self.call("Input.dispatchMouseEvent", {"type": "mousePressed", "x": x0, "y": y0, **left})
        self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x1, "y": y1, "button": "left"})
        self.call("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": x1, "y": y1, **left})

    def key(self, key: str) -> None:
        """A key press and release (a printable key, e.g. ``"w"``)."""
        code = f"Key{key.upper()}" if key.isalpha() else key
        for kind in ("keyDown", "keyUp"):
            event = {"type": kind, "key": key, "code": code, "text": key if kind == "keyDown" else ""}
            self.call("Input.dispatchKeyEvent", event)
        self.eval("new Promise(r => requestAnimationFrame(() => r(1)))")

    def hover(self, x: float, y: float) -> None:
        self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    def screenshot(self, path: Path, *, full_page: bool = False, clip: dict[str, float] | None = None) -> Path:
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", params)["data"]))
        return path
