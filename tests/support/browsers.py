"""Debian's browsers for the HTML report tests, never a downloaded build.

* Chromium (``/usr/bin/chromium``) driven by Playwright over CDP, with request interception and the
  console, for the deepest checks.
* Firefox ESR (``/usr/bin/firefox-esr``) driven through Marionette, Firefox's own remote protocol,
  with Mozilla's ``marionette_driver``. Playwright's Firefox needs its own patched build, which this
  machine cannot download, and its WebDriver BiDi path for a stock Firefox
  (``channel="moz-firefox"``) sends commands Firefox ESR 153 does not know
  (``emulation.setMediaFeaturesOverride``).

Both give a page with ``evaluate(expression)`` (a JavaScript expression's JSON value) and
``screenshot(path, selector=None)``, so the same checks run in both engines.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
FIREFOX = "/usr/bin/firefox-esr"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}
#: Where screenshots go, for people to look at.
SCREENSHOTS = Path(os.environ.get("IOLAB_SCREENSHOT_DIR", tempfile.gettempdir()))


class ChromiumPage:
    """A Chromium tab; ``problems`` are console errors and warnings and page errors, ``requests``
    every URL the page asked for, ``dialogs`` every alert it opened (all recorded from the start)."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.problems: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.problems.append(f"{m.type}: {m.text}")
                if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("request", lambda r: self.requests.append(r.url))

    def evaluate(self, expression: str) -> Any:
        return self.page.evaluate(expression)

    def screenshot(self, path: Path, selector: str | None = None) -> None:
        if selector:
            self.page.locator(selector).screenshot(path=str(path))
        else:
            self.page.screenshot(path=str(path), full_page=True)


class FirefoxPage:
    def __init__(self, marionette: Any) -> None:
        self.marionette = marionette

    def evaluate(self, expression: str) -> Any:
        return self.marionette.execute_script(f"return {expression};")

    def screenshot(self, path: Path, selector: str | None = None) -> None:
        from marionette_driver.by import By

        element = self.marionette.find_element(By.CSS_SELECTOR, selector) if selector else None
        path.write_bytes(base64.b64decode(self.marionette.screenshot(element=element, full=element is None)))


def wait_for_charts(page: ChromiumPage | FirefoxPage, timeout_s: float = 60) -> None:
    """Until the report's script says every chart has settled (``report.js``)."""
    deadline = time.monotonic() + timeout_s
    while page.evaluate("document.body.dataset.charts || ''") != "done":
        assert time.monotonic() < deadline, "the charts did not settle"
        time.sleep(0.1)


@contextlib.contextmanager
def chromium() -> Iterator[Callable[[Path], ChromiumPage]]:
    """Open report files in one headless Chromium; anything but the file itself is refused."""
    if not os.path.exists(CHROMIUM):
        pytest.skip("Chromium is not installed (Debian package chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) is not installed")
    profile = tempfile.mkdtemp(prefix="iolab-chromium-")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                                       headless=True, viewport=VIEWPORT)

        def open_(path: Path) -> ChromiumPage:
            page = context.new_page()
            opened = ChromiumPage(page)
            # anything but the file itself is refused, so a slip could not reach the network either
            page.route("**/*", lambda route: route.continue_() if route.request.url == path.as_uri()
                       else route.abort())
            page.goto(path.as_uri())
            return opened

        try:
            yield open_
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def firefox() -> Iterator[Callable[[Path], FirefoxPage]]:
    """Open report files in one headless Firefox ESR through Marionette."""
    if not os.path.exists(FIREFOX):
        pytest.skip("Firefox ESR is not installed (Debian package firefox-esr)")
    driver = pytest.importorskip("marionette_driver.marionette", reason="marionette_driver (dev extra) is missing")
    marionette = driver.Marionette(bin=FIREFOX, headless=True, port=_free_port(), startup_timeout=120,
                                   gecko_log=str(SCREENSHOTS / "iolab-firefox-gecko.log"))  # not ./gecko.log
    try:
        marionette.start_session()
        marionette.set_window_rect(**VIEWPORT)

        def open_(path: Path) -> FirefoxPage:
            marionette.navigate(path.as_uri())
            return FirefoxPage(marionette)

        yield open_
    finally:
        with contextlib.suppress(Exception):
            marionette.delete_session()
        runner = getattr(marionette.instance, "runner", None)
        marionette.cleanup()  # stops Firefox and removes its temporary profile
        if runner is not None and runner.profile is not None:
            runner.profile.restore = False  # removed: its finaliser must not try again while Python shuts down


BROWSERS = {"chromium": chromium, "firefox": firefox}
