"""Headless Chromium for the page tests (eval.report.browser: Selenium with Debian's chromium and
chromium-driver, installed by ``install.sh dev``; no browser download, no network).

Every page the project serves or writes must work offline: :func:`network_requests` lists what a
page asked for beyond its own origin, and :func:`console_errors` what it logged as errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval.report.browser import available, chromium_driver


@pytest.fixture
def browser(tmp_path: Path) -> Iterator:
    """A fresh headless Chromium per test (skipped where Chromium is not installed)."""
    if not available():
        pytest.skip("Chromium and chromedriver are not installed (bash install.sh dev)")
    driver = chromium_driver(tmp_path / "chromium-profile")
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver) -> list[str]:
    """The page's console messages at level SEVERE since the last call."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def network_requests(driver, allowed_prefixes: tuple[str, ...] = ()) -> list[str]:
    """URLs the page requested since the last call, except local ones (``file:``, ``data:``,
    ``blob:``, ``about:``) and those starting with one of ``allowed_prefixes`` (the page's own server)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    local = ("data:", "blob:", "about:", "chrome:", "devtools:", "file:", *allowed_prefixes)
    return [url for url in urls if not url.startswith(local)]
