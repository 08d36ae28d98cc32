"""A headless Chromium driven through chromedriver's W3C WebDriver protocol (JSON over HTTP),
with nothing but the standard library: Debian's `chromium` and `chromium-driver` packages are
all it needs.

`Browser.open()` raises `BrowserUnavailable` with the reason when the browser cannot run
here; the tests skip on it locally and fail on it in CI.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.postgres import _free_port

BINARIES = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver",)


class BrowserUnavailable(Exception):
    pass


def _which(names: tuple[str, ...]) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One chromedriver process and one headless browser session."""

    def __init__(self, driver: subprocess.Popen[bytes], url: str, session: str, profile: str):
        self._driver = driver
        self._url = url
        self._session = session
        self._profile = profile

    @classmethod
    def open(cls) -> Browser:
        binary, driver_path = _which(BINARIES), _which(DRIVERS)
        if binary is None or driver_path is None:
            raise BrowserUnavailable(
                "Chromium and its driver are not installed "
                "(apt-get install chromium chromium-driver)"
            )
        port = _free_port()
        driver = subprocess.Popen(
            [driver_path, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        url = f"http://127.0.0.1:{port}"
        profile = tempfile.mkdtemp(prefix="s3gw-chromium-")
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    if _call("GET", f"{url}/status").get("ready"):
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline or driver.poll() is not None:
                    raise BrowserUnavailable(f"chromedriver ({driver_path}) did not start")
                time.sleep(0.1)
            options = {
                "binary": binary,
                "args": [
                    "--headless=new",
                    "--no-sandbox",  # tests run as root in containers
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    f"--user-data-dir={profile}",
                ],
            }
            capabilities = {"alwaysMatch": {"goog:chromeOptions": options}}
            try:
                created = _call("POST", f"{url}/session", {"capabilities": capabilities})
            except WebDriverError as exc:
                raise BrowserUnavailable(f"Chromium ({binary}) did not start: {exc}") from exc
            browser = cls(driver, url, created["sessionId"], profile)
            browser._command("POST", "timeouts", {"script": 60_000, "pageLoad": 60_000})
            return browser
        except BaseException:
            driver.kill()
            driver.wait()
            shutil.rmtree(profile, ignore_errors=True)
            raise

    def _command(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return _call(method, f"{self._url}/session/{self._session}/{path}", body)

    def get(self, url: str) -> None:
        self._command("POST", "url", {"url": url})

    @property
    def current_url(self) -> str:
        return str(self._command("GET", "url"))

    def run_async(self, script: str, *args: Any) -> Any:
        """Run `script` in the page; it ends by calling its last argument with the result."""
        return self._command("POST", "execute/async", {"script": script, "args": list(args)})

    def run(self, script: str, *args: Any) -> Any:
        return self._command("POST", "execute/sync", {"script": script, "args": list(args)})

    def set_size(self, width: int, height: int) -> None:
        self._command("POST", "window/rect", {"width": width, "height": height})

    def screenshot(self) -> bytes:
        """The viewport as PNG."""
        return base64.b64decode(self._command("GET", "screenshot"))

    def _element(self, selector: str) -> str:
        found = self._command("POST", "element", {"using": "css selector", "value": selector})
        return str(next(iter(found.values())))

    def click(self, selector: str) -> None:
        self._command("POST", f"element/{self._element(selector)}/click", {})

    def type(self, selector: str, text: str) -> None:
        """Keys typed into the element, as a user types them; for an <input type=file>,
        the paths of the files picked (one a line)."""
        self._command("POST", f"element/{self._element(selector)}/value", {"text": text})

    def wait_for_url(self, prefix: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while True:
            url = self.current_url
            if url.startswith(prefix):
                return url
            if time.monotonic() > deadline:
                raise AssertionError(f"the browser is at {url}, not {prefix}...")
            time.sleep(0.1)

    def wait_for(self, selector: str, timeout: float = 30) -> None:
        """Until an element `selector` names is in the page (a click that submits a form
        returns before the next page has loaded)."""
        deadline = time.monotonic() + timeout
        script = "return document.querySelector(arguments[0]) !== null;"
        while True:
            try:
                if self.run(script, selector):
                    return
            except WebDriverError:  # the page went while the script ran: try the next one
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"no {selector} in {self.current_url} after {timeout} s")
            time.sleep(0.1)

    def wait_for_text(self, text: str, selector: str = "main", timeout: float = 30) -> str:
        """The text of the element `selector` names, once it holds `text` (a form posted to
        the page it came from changes no URL to wait for)."""
        deadline = time.monotonic() + timeout
        script = "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';"
        while True:
            try:
                shown = str(self.run(script, selector))
            except WebDriverError:  # the page went while the script ran: try the next one
                shown = ""
            if text in shown:
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not in {selector} after {timeout} s: {shown!r}")
            time.sleep(0.1)

    def close(self) -> None:
        try:
            _call("DELETE", f"{self._url}/session/{self._session}")
        except (OSError, WebDriverError):
            pass
        finally:
            self._driver.terminate()
            try:
                self._driver.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._driver.kill()
                self._driver.wait()
            shutil.rmtree(Path(self._profile), ignore_errors=True)


def browser_for_test() -> Browser:
    """A browser for a test: skipped, saying why, where none can run, except under CI=1,
    where that fails the test."""
    import pytest

    try:
        return Browser.open()
    except BrowserUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs a browser for this test: {exc}")
        pytest.skip(f"no browser: {exc}")


class WebDriverError(Exception):
    pass


def _call(method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=90) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = json.loads(exc.read() or b"{}").get("value", {})
        raise WebDriverError(f"{detail.get('error')}: {detail.get('message')}") from exc
    return answer.get("value")
