"""Headless Chromium driven by Selenium, with Debian's chromium and chromium-driver (installed by
``bash install.sh dev``; no browser download, no network): the report's screenshots for docs/, and
the page tests' browser (tests/browser.py).

Chromium's own background traffic (updates, sync, safe browsing) is switched off, so every request
seen is the page's.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
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
    "--hide-scrollbars",
)


def available() -> bool:
    return bool(CHROMIUM and CHROMEDRIVER)


def chromium_driver(user_data_dir: Path, width: int = 1280, height: int = 900) -> Any:
    """A Selenium Chrome driver on headless Chromium that records console and network logs."""
    if not available():
        raise FileNotFoundError(
            "Chromium and chromedriver are not installed (bash install.sh dev installs them)"
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise ImportError("selenium is not installed (pip install -e '.[dev]')") from None

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    options.add_argument(f"--user-data-dir={user_data_dir}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
