"""The history page in headless Chromium: it loads from disk with no console error and no network
request, draws a trend per metric, lists every evaluation with its interval, and shows the
comparison of the two evaluations picked, or why they cannot be compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.history.page import PageConfig, build_page, write_page
from tests.browser import console_errors, network_requests
from tests.history.records import record, values

pytestmark = pytest.mark.browser


@pytest.fixture
def page(store, tmp_path: Path) -> Path:
    report = tmp_path / "runs" / "v2" / "report.html"
    report.parent.mkdir(parents=True)
    report.write_text("<html><body>report</body></html>")
    record(store, "v1", values(1), 1)
    record(store, "v2", values(1, shift=0.2), 2, report_path=str(report))
    record(store, "v1", values(3), 3, system="bm25", labeler="z")
    out = tmp_path / "history.html"
    return write_page(build_page(store, PageConfig(store="x", out=str(out))), out)


def open_page(browser, page: Path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(page.resolve().as_uri())
    WebDriverWait(browser, 20).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true"
    )
    return By, Select


def test_the_page_loads_offline_and_draws_a_trend_per_metric(browser, page: Path):
    By, _ = open_page(browser, page)
    assert console_errors(browser) == []
    assert network_requests(browser) == []
    figure = browser.find_element(
        By.CSS_SELECTOR, '#trend-figures figure[data-metric="ndcg@10"] svg'
    )
    assert figure.size["width"] > 300
    rows = browser.find_elements(By.CSS_SELECTOR, "#evaluations-table tr[data-id]")
    assert len(rows) == 3
    link = browser.find_element(By.LINK_TEXT, "dense@v2")
    assert link.get_attribute("href").endswith("runs/v2/report.html")
    # The trend's point of that evaluation links there too.
    anchors = figure.find_elements(By.TAG_NAME, "a")
    hrefs = [browser.execute_script("return arguments[0].href.baseVal", a) for a in anchors]
    assert hrefs == ["runs/v2/report.html"]


def test_the_default_comparison_is_the_latest_version_against_the_one_before(browser, page: Path):
    By, Select = open_page(browser, page)
    Select(browser.find_element(By.ID, "a-select")).select_by_value("2")
    Select(browser.find_element(By.ID, "b-select")).select_by_value("1")
    row = browser.find_element(By.CSS_SELECTOR, '#compare-table tr[data-metric="ndcg@10"]')
    assert "A worse" in row.text and "paired t" in row.text
    assert row.find_element(By.CSS_SELECTOR, ".est").text.startswith("−") or row.find_element(
        By.CSS_SELECTOR, ".est"
    ).text.startswith("-")
    moved = browser.find_elements(By.CSS_SELECTOR, "#moved-table tr")
    assert len(moved) == 1 + 5  # the header and the five queries that moved most
    # B against A: the same interval, mirrored.
    Select(browser.find_element(By.ID, "a-select")).select_by_value("1")
    Select(browser.find_element(By.ID, "b-select")).select_by_value("2")
    row = browser.find_element(By.CSS_SELECTOR, '#compare-table tr[data-metric="ndcg@10"]')
    assert "A better" in row.text


def test_evaluations_by_other_labelers_show_why_they_are_not_compared(browser, page: Path):
    By, Select = open_page(browser, page)
    Select(browser.find_element(By.ID, "a-select")).select_by_value("3")
    Select(browser.find_element(By.ID, "b-select")).select_by_value("1")
    summary = browser.find_element(By.ID, "compare-summary")
    assert "differ in labeler" in summary.text
    assert browser.find_elements(By.CSS_SELECTOR, "#compare-table tr") == []
