"""Headless Chromium for the page tests, driven by Selenium with Debian's chromium and
chromium-driver (installed by ``install.sh dev``; no browser download, no network).

Every page the project serves or writes must work offline: :func:`network_requests` lists what a
page asked for beyond its own origin, and :func:`console_errors` what it logged as errors.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
# Chromium's own background traffic (updates, sync, safe browsing) is switched off, so every
# request a test sees is the page's.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)


def _driver(user_data_dir: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={user_data_dir}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


@pytest.fixture
def browser(tmp_path: Path) -> Iterator:
    """A fresh headless Chromium per test (skipped where Chromium is not installed)."""
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Chromium and chromedriver are not installed (bash install.sh dev)")
    driver = _driver(tmp_path / "chromium-profile")
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
