"""The report as one self-contained HTML file: page.html with page.css, page.js, the report's JSON
and its SVG plots inline, so it opens from disk and asks no network for anything."""

from __future__ import annotations

import html
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from string import Template
from typing import Any

from core.errors import InputError
from core.io import atomic_writer
from eval.report.model import Report

ASSETS = Path(__file__).parent


def embedded_json(value: Any) -> str:
    """JSON that is safe inside a <script> element: no '<' can close it early."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).replace(
        "<", "\\u003c"
    )


def render(report: Report, figures: dict[str, str]) -> str:
    """The page's HTML: the template filled with the styles, the script and the data."""
    template = Template((ASSETS / "page.html").read_text(encoding="utf-8"))
    return template.substitute(
        title=html.escape(report.title),
        style=(ASSETS / "page.css").read_text(encoding="utf-8"),
        script=(ASSETS / "page.js").read_text(encoding="utf-8"),
        data=embedded_json({"report": report.to_dict(), "figures": figures}),
    )


def write_page(report: Report, out: str | os.PathLike[str]) -> Path:
    from eval.report.figures import report_figures

    with atomic_writer(out) as handle:
        handle.write(render(report, report_figures(report)))
    return Path(out)


def screenshot(
    page: str | os.PathLike[str],
    out: str | os.PathLike[str],
    width: int = 1280,
    height: int = 1600,
    at: str = "",
) -> Path:
    """A PNG of the page as headless Chromium draws it, ``width`` pixels wide: its top ``height``
    pixels, or with ``at`` one part of it whole: a section's id (``queries``, ``agreement``,
    ``leaderboard``, ``ranking``, ...) or ``query=QID`` (that query's hits, opened as a click
    opens them)."""
    from selenium.webdriver.common.by import By

    from eval.report.browser import chromium_driver

    url = Path(page).resolve().as_uri() + (f"#{at}" if at.startswith("query=") else "")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="report-chromium-") as profile:
        driver = chromium_driver(Path(profile), width, height)
        try:
            driver.get(url)
            if not at:
                driver.save_screenshot(str(out))
            else:
                target = "query-detail" if at.startswith("query=") else at
                # The whole page in the window: a part taller than the screen is not cut, and
                # the sticky header stays at the top instead of over the part.
                full = driver.execute_script("return document.documentElement.scrollHeight")
                driver.set_window_size(width, full + 200)
                driver.find_element(By.ID, target).screenshot(str(out))
        finally:
            driver.quit()
    _palette(out)
    return out


def _palette(png: Path) -> None:
    """Store the screenshot with a 128-colour palette: a page of text looks the same at a third
    of the size, which matters for PNGs committed under docs/. Maximum-coverage quantization
    keeps the rare colours (a red NO, a green mark) that median cut would merge into grey."""
    from PIL import Image

    with Image.open(png) as image:
        reduced = image.convert("RGB").quantize(
            128, method=Image.Quantize.MAXCOVERAGE, dither=Image.Dither.NONE
        )
    reduced.save(png, optimize=True)


def output_path(
    folder: str | os.PathLike[str],
    out: str | os.PathLike[str] | None,
    inputs: Sequence[tuple[str, str | None]] = (),
) -> Path:
    """``out`` (default: ``FOLDER/report.html``), refused before any work when it cannot be
    written, would replace one of the files the report reads (the folder's JSON, ``inputs``:
    (flag, path) of the corpus, queries, human qrels...), or is an existing file that is not a
    report page: whatever it is (a corpus, qrels, inferred_qrels.txt), it is not the report's to
    replace."""
    from core.io import check_writable_file, refuse_overlap
    from eval.report.inputs import locate

    folder = Path(folder)
    _, search_dir = locate(folder)
    target = Path(out) if out else folder / "report.html"
    check_writable_file("--out", target)
    read = [*folder.glob("*.json"), *folder.glob("*/*.json"), *search_dir.glob("*.json")]
    refuse_overlap("--out", target, [("input", path) for path in read] + list(inputs))
    refuse_foreign_file("--out", target, is_report_page)
    return target


def is_report_page(path: Path) -> bool:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return '<script id="report-data"' in handle.read(1 << 20)


def is_png(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(8) == b"\x89PNG\r\n\x1a\n"


def refuse_foreign_file(flag: str, target: Path, kind: Callable[[Path], bool]) -> None:
    """An existing file at ``target`` is replaced only when it is what this command writes."""
    if target.is_file() and not kind(target):
        raise InputError(
            f"{flag}: {target} exists and is not a file this command writes (it may be one of "
            "the report's inputs); give another path"
        )


def write_report(
    folder: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    options: Any = None,
) -> Path:
    """Build the report of ``folder`` and write it to :func:`output_path`."""
    from eval.report.build import build_report

    target = output_path(folder, out)
    return write_page(build_report(folder, options), target)
