"""Headless Chromium driven over the DevTools protocol (CDP) through ``--remote-debugging-pipe``.

A small CDP client with no dependency: Chromium reads JSON commands from fd 3 and writes
responses and events to fd 4, each message ending in a NUL byte.  :func:`open_page` loads
one URL and returns what a test needs: a PNG screenshot, the console errors (console
``error``/``assert`` calls, uncaught exceptions, browser log entries at ``error`` level,
which include Content-Security-Policy violations and failed loads), every network request
the page made other than to ``file:``/``data:``/``about:`` URLs, and the page's text.

Chromium is Debian's ``chromium`` package (``/usr/bin/chromium`` or ``$SPOOLPROXY_CHROMIUM``);
:func:`chromium_path` returns None when it is absent so tests can skip with the reason.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--no-default-browser-check", "--disable-sync",
         "--disable-extensions", "--mute-audio", "--hide-scrollbars", "--remote-debugging-pipe"]


def chromium_path() -> str | None:
    """The Chromium executable, or None when it is not installed."""
    for cand in (os.environ.get("SPOOLPROXY_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                 shutil.which("chromium-browser")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


@dataclass
class PageResult:
    """What loading a page showed: ``png`` (viewport screenshot), ``full_png`` (the whole
    page, up to ``max_height`` CSS pixels), ``errors`` (one line each), ``requests`` (URLs
    of network requests), ``text`` (``document.body.innerText``), ``title``."""

    png: bytes = b""
    full_png: bytes = b""
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    text: str = ""
    title: str = ""


class _Cdp:
    def __init__(self, exe: str, profile: str) -> None:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        hi_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        hi_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        os.close(to_child_r)
        os.close(from_child_w)

        def wire():  # in the child: fd 3 = commands in, fd 4 = messages out
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=wire, pass_fds=(3, 4))
        os.close(hi_r)
        os.close(hi_w)
        self._next = 0
        self._replies: dict[int, dict] = {}
        self._cond = threading.Condition()
        self.events: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_child, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cond:
                        self._replies[msg["id"]] = msg
                        self._cond.notify_all()
                else:
                    self.events.put(msg)
        with self._cond:
            self._cond.notify_all()

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        self._next += 1
        n = self._next
        msg = {"id": n, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while n not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise RuntimeError(f"chromium gave no answer to {method}")
                self._cond.wait(left)
            reply = self._replies.pop(n)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass


def open_page(url: str, *, width: int = 1280, height: int = 900, scripts: bool = True, max_height: int = 6000,
              timeout: float = 30) -> PageResult:
    """Load ``url`` in a fresh headless Chromium profile and report what happened (see
    :class:`PageResult`).  ``scripts=False`` disables JavaScript for the page.  Raises
    RuntimeError when Chromium is missing or does not answer."""
    exe = chromium_path()
    if exe is None:
        raise RuntimeError("chromium is not installed (apt-get install chromium)")
    result = PageResult()
    with tempfile.TemporaryDirectory(prefix="spoolproxy-chromium-") as profile:
        cdp = _Cdp(exe, profile)
        try:
            target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            sid = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                cdp.send(f"{domain}.enable", session=sid)
            cdp.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                            "mobile": False}, session=sid)
            if not scripts:
                cdp.send("Emulation.setScriptExecutionDisabled", {"value": True}, session=sid)
            cdp.send("Page.navigate", {"url": url}, session=sid)
            deadline = time.monotonic() + timeout
            loaded = False
            while time.monotonic() < deadline:
                try:
                    ev = cdp.events.get(timeout=0.2)
                except queue.Empty:
                    if loaded:
                        break  # loaded, and quiet for 200 ms
                    continue
                loaded = _note(ev, result) or loaded
            if not loaded:
                raise RuntimeError(f"{url} did not finish loading within {timeout} s")
            shot = cdp.send("Page.captureScreenshot", {"format": "png"}, session=sid)
            result.png = base64.b64decode(shot["data"])
            size = cdp.send("Page.getLayoutMetrics", session=sid)["cssContentSize"]
            clip = {"x": 0, "y": 0, "width": width, "height": min(max_height, int(size["height"])), "scale": 1}
            full = cdp.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip},
                            session=sid)
            result.full_png = base64.b64decode(full["data"])
            cdp.send("Emulation.setScriptExecutionDisabled", {"value": False}, session=sid)
            evaluated = cdp.send("Runtime.evaluate", {"expression": "[document.title, document.body.innerText]",
                                                      "returnByValue": True}, session=sid)
            result.title, result.text = evaluated["result"]["value"]
            while not cdp.events.empty():
                _note(cdp.events.get_nowait(), result)
        finally:
            cdp.close()
    return result


def _note(ev: dict, result: PageResult) -> bool:
    """Record one CDP event in ``result``; True for the page's load event."""
    method, p = ev.get("method"), ev.get("params", {})
    if method == "Page.loadEventFired":
        return True
    if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
        result.errors.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
    elif method == "Runtime.exceptionThrown":
        result.errors.append("exception: " + p["exceptionDetails"].get("text", ""))
    elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
        result.errors.append(f"log ({p['entry'].get('source')}): {p['entry'].get('text')}")
    elif method == "Network.requestWillBeSent":
        url = p["request"]["url"]
        if not url.startswith(("file:", "data:", "about:")):
            result.requests.append(url)
    return False


def assert_not_blank(png: bytes, *, min_colours: int = 16, max_background: float = 0.97) -> None:
    """Fail unless the PNG shows something: more than ``min_colours`` distinct colours and
    no single colour covering more than ``max_background`` of the pixels."""
    import io

    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    colours = img.getcolors(maxcolors=1 << 20) or []
    total = img.width * img.height
    top = max((n for n, _ in colours), default=total)
    assert len(colours) > min_colours, f"screenshot has only {len(colours)} colours: blank?"
    assert top / total < max_background, f"one colour covers {top / total:.1%} of the screenshot: blank?"


def save_screenshot(name: str, png: bytes) -> None:
    """Keep a screenshot in ``$SPOOLPROXY_SCREENSHOTS`` (when set) for a person to look at."""
    where = os.environ.get("SPOOLPROXY_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        (Path(where) / name).write_bytes(png)
