"""The report page in headless Chromium: it loads from disk with no console error and no network
request, shows metrics.json's numbers, opens a query's hits, sorts, and says when there is no
interval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.report.page import write_report
from measure.metrics.results import PerQueryResults
from tests.browser import console_errors, network_requests
from tests.eval.report_inputs import JUDGED, K, make_main_job_folder, make_search_folders

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def pages(adi_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("report-page")
    folders = make_search_folders(adi_dir, root)
    main_job = make_main_job_folder(folders["human"], adi_dir, root)
    return {
        "human": folders["human"],
        "no_human": folders["no_human"],
        "main_job": main_job,
        "pages": {
            "human": folders["human"] / "report.html",  # written by eval.search
            "no_human": write_report(folders["no_human"]),
            "main_job": write_report(main_job),
        },
    }


def open_page(browser, page: Path, fragment: str = ""):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(page.resolve().as_uri() + fragment)
    WebDriverWait(browser, 20).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true"
    )
    return By


def cell_text(browser, By, run: str, metric: str, part: str) -> str:
    selector = f'#headline-table td[data-run="{run}"][data-metric="{metric}"] .{part}'
    return browser.find_element(By.CSS_SELECTOR, selector).text


@pytest.mark.parametrize("name", ["human", "no_human", "main_job"])
def test_the_page_loads_offline_without_errors(browser, pages, name: str):
    By = open_page(browser, pages["pages"][name])
    assert console_errors(browser) == []
    assert network_requests(browser) == []
    assert browser.find_element(By.ID, "title").text
    figure = browser.find_element(By.CSS_SELECTOR, '[data-figure="estimates"] svg')
    assert figure.size["width"] > 300


def test_the_headline_shows_metrics_json(browser, pages):
    metrics = json.loads((pages["human"] / "metrics.json").read_text())
    By = open_page(browser, pages["pages"]["human"])
    for run, values in metrics["ppi"]["runs"].items():
        for metric, entry in values.items():
            ppi = entry["ppi"]
            assert cell_text(browser, By, run, metric, "est") == f"{ppi['estimate']:.3f}"
            assert (
                cell_text(browser, By, run, metric, "ci")
                == f"[{ppi['low']:.3f}, {ppi['high']:.3f}]"
            )
            assert (
                cell_text(browser, By, run, metric, "labeler")
                == f"{metrics['mean'][run][metric]:.3f}"
            )
    difference = metrics["ppi"]["differences"]["shuffled - good"][f"ndcg@{K}"]["ppi"]
    shown = browser.find_element(
        By.CSS_SELECTOR, f'#differences-table td[data-metric="ndcg@{K}"] .ci'
    ).text
    assert shown == f"[{difference['low']:.3f}, {difference['high']:.3f}]"
    # The paired test ran on the labeler's labels: its letters never sit on a PPI++ estimate...
    assert not browser.find_elements(By.CSS_SELECTOR, "#headline-table sup.sig")
    # ...only on the labeler's means, where the run that beats the other carries its letter.
    By = open_page(browser, pages["pages"]["no_human"])
    assert cell_text(browser, By, "good", f"ndcg@{K}", "sig") == "b"


def test_without_human_judgments_the_page_says_there_is_no_interval(browser, pages):
    metrics = json.loads((pages["no_human"] / "metrics.json").read_text())
    By = open_page(browser, pages["pages"]["no_human"])
    notice = browser.find_element(By.ID, "headline-notice").text
    assert "biased" in notice and "no interval" in notice
    for run, values in metrics["mean"].items():
        for metric, value in values.items():
            assert cell_text(browser, By, run, metric, "est") == f"{value:.3f}"
            assert cell_text(browser, By, run, metric, "ci") == "labeler mean, no interval"
    assert not browser.find_element(By.ID, "agreement").is_displayed()


def test_choosing_a_query_shows_its_hits_run_by_run(browser, pages):
    per_query = PerQueryResults.read(pages["human"] / "per_query.json").runs
    By = open_page(browser, pages["pages"]["human"])
    row = browser.find_elements(By.CSS_SELECTOR, "#query-table tbody tr")[3]
    qid = row.get_attribute("data-qid")
    row.click()
    detail = browser.find_element(By.ID, "query-detail")
    assert detail.is_displayed() and detail.get_attribute("data-qid") == qid
    for run, results in per_query.items():
        column = detail.find_element(By.CSS_SELECTOR, f'.hits-column[data-run="{run}"]')
        shown = [
            hit.get_attribute("data-doc") for hit in column.find_elements(By.CLASS_NAME, "hit")
        ]
        assert shown == [hit.id for hit in results[qid].hits]
    assert browser.current_url.endswith(f"#query={qid}")
    assert console_errors(browser) == []


def test_a_judged_query_marks_the_disagreements(browser, pages):
    from eval.report.build import build_report

    report = build_report(pages["human"])
    judged = next(row for row in report.queries if row.judged and row.disagreements)
    By = open_page(browser, pages["pages"]["human"], f"#query={judged.qid}")
    detail = browser.find_element(By.ID, "query-detail")
    assert detail.get_attribute("data-qid") == judged.qid
    marked = {
        hit.get_attribute("data-doc")
        for hit in detail.find_elements(By.CSS_SELECTOR, ".hit.disagrees")
    }
    expected = {h.doc_id for hits in judged.hits.values() for h in hits if h.disagrees}
    assert marked == expected and marked


def test_sorting_and_filtering_the_query_table(browser, pages):
    By = open_page(browser, pages["pages"]["human"])

    def column(key: str) -> list[str]:
        cells = browser.find_elements(By.CSS_SELECTOR, f'#query-table tbody td[data-key="{key}"]')
        return [cell.text.split("\n")[0] for cell in cells]

    def header():  # the table is drawn anew on each sort
        return browser.find_element(By.CSS_SELECTOR, '#query-table th[data-key="run:good"]')

    header().click()
    values = [float(v) for v in column("run:good")]
    assert values == sorted(values, reverse=True) and len(set(values)) > 1
    assert header().get_attribute("aria-sort") == "descending"
    header().click()
    values = [float(v) for v in column("run:good")]
    assert values == sorted(values)
    assert header().get_attribute("aria-sort") == "ascending"
    browser.find_element(By.ID, "judged-only").click()
    assert len(column("qid")) == JUDGED
    assert console_errors(browser) == []


def test_the_main_job_page_shows_the_cross_validation_and_the_ranking(browser, pages):
    summary = json.loads((pages["main_job"] / "summary.json").read_text())
    cross = summary["cross_validation"]
    By = open_page(browser, pages["pages"]["main_job"])
    assert browser.find_element(By.ID, "held-out").is_displayed()
    for model, pooled in cross["pooled"].items():
        row = browser.find_element(By.CSS_SELECTOR, f'#pooled-table tr[data-model="{model}"]')
        for key in ("roc_auc", "query_roc_auc", "kappa"):
            assert row.find_element(By.CSS_SELECTOR, f'td[data-key="{key}"]').text == (
                f"{pooled[key]:.3f}"
            )
    grader = browser.find_element(By.CSS_SELECTOR, '#pooled-table tr[data-model="grader"]')
    for d in cross["differences"]:
        cell = grader.find_element(By.CSS_SELECTOR, f'td[data-baseline="{d["baseline"]}"]')
        assert cell.find_element(By.CLASS_NAME, "est").text == f"{d['mean']:+.3f}"
        assert cell.find_element(By.CLASS_NAME, "ci").text == f"[{d['low']:+.3f}, {d['high']:+.3f}]"
    assert cross["beats_every_baseline"]["grader"] is False  # the fixture's grader ties cosine
    verdict = grader.find_element(By.CLASS_NAME, "verdict")
    assert verdict.text == "NO" and "loses" in verdict.get_attribute("class")
    assert browser.find_element(By.CSS_SELECTOR, '[data-figure="differences"] svg')
    fold = browser.find_element(By.CSS_SELECTOR, '#per-fold-table tr[data-fold="3"]')
    expected = next(r for r in summary["per_fold"] if r["fold"] == 3 and r["model"] == "cosine")
    assert fold.find_element(By.CSS_SELECTOR, 'td[data-model="cosine"]').text == (
        f"{expected['roc_auc']:.3f}"
    )
    assert "The grader of fold 0 is exported" in browser.find_element(By.ID, "export-fold").text
    assert browser.find_element(By.ID, "kappa").text == f"{cross['pooled']['grader']['kappa']:.3f}"
    assert "out of fold" in browser.find_element(By.ID, "agreement-scope").text
    assert "calibration check" in browser.find_element(By.ID, "held-out-tables").text
    taus = browser.find_element(By.ID, "ranking-taus").text
    assert "-1.000" in taus
    assert console_errors(browser) == []


def test_a_single_run_without_comparisons_draws_without_errors(browser, pages, tmp_path: Path):
    """One run (eval.search without --compare): no differences, no marks, no ranking."""
    import shutil

    single = tmp_path / "single"
    shutil.copytree(pages["no_human"], single)
    metrics = json.loads((single / "metrics.json").read_text())
    metrics["mean"] = {"good": metrics["mean"]["good"]}
    metrics.pop("comparison")
    (single / "metrics.json").write_text(json.dumps(metrics))
    per_query = PerQueryResults.read(single / "per_query.json")
    PerQueryResults(runs={"good": per_query.runs["good"]}).write(single / "per_query.json")
    By = open_page(browser, write_report(single))
    assert console_errors(browser) == []
    assert not browser.find_element(By.ID, "differences-table").is_displayed()
    assert not browser.find_element(By.ID, "ranking").is_displayed()
    browser.find_element(By.CSS_SELECTOR, "#query-table tbody tr").click()
    assert browser.find_elements(By.CSS_SELECTOR, '#query-detail .hits-column[data-run="good"]')


@pytest.mark.parametrize("at", ["", "agreement", "query"])
def test_screenshots_show_the_page(pages, tmp_path: Path, at: str):
    """The docs' screenshots (relevance-grader report --screenshot): the part asked for, drawn."""
    from PIL import Image

    from eval.report.browser import available
    from eval.report.build import build_report
    from eval.report.page import screenshot

    if not available():
        pytest.skip("Chromium and chromedriver are not installed (bash install.sh dev)")
    if at == "query":
        at = f"query={build_report(pages['human']).telling_query()}"
    png = screenshot(pages["pages"]["human"], tmp_path / "shot.png", 900, 700, at)
    with Image.open(png) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
        assert image.width <= 900 and image.height > 150
    assert colours is None or len(colours) > 8  # drawn, not a blank page


def test_the_held_out_screenshot_keeps_the_red_no(pages, tmp_path: Path):
    """The palette the PNGs are stored with keeps a rare colour: the verdict's red NO."""
    from PIL import Image

    from eval.report.browser import available
    from eval.report.page import screenshot

    if not available():
        pytest.skip("Chromium and chromedriver are not installed (bash install.sh dev)")
    png = screenshot(pages["pages"]["main_job"], tmp_path / "held-out.png", 1280, 900, "held-out")
    with Image.open(png) as image:
        colours = {colour for _, colour in image.convert("RGB").getcolors(maxcolors=1 << 16)}
    assert (0xB3, 0x26, 0x1E) in colours  # page.css's --bad


def test_a_clipped_not_estimable_cell_and_a_low_coverage_metric_say_so(
    browser, pages, tmp_path: Path
):
    """A MAP estimate PPI++ put below 0 is shown as eval.search clipped it (the human-only
    interval, said in the cell); a metric measured below 0.93 coverage carries a † in its
    heading; the differences' legend states the multiplicity rule."""
    import shutil

    folder = tmp_path / "clipped"
    shutil.copytree(pages["human"], folder)
    metrics = json.loads((folder / "metrics.json").read_text())
    ppi = metrics["ppi"]
    ppi["runs"]["good"]["map"]["ppi"] |= {
        "estimate": 0.0,
        "low": 0.0,
        "high": 0.05,
        "lam": 0.0,
        "method": "classical (t); PPI++ not estimable here: its estimate fell outside the range",
    }
    ppi["measured_coverage"] = {
        f"ndcg@{K}": {"coverage": 0.95, "at_n": 5, "below_target": False, "target": 0.93},
        "map": {"coverage": 0.83, "at_n": 5, "below_target": True, "target": 0.93},
    }
    (folder / "metrics.json").write_text(json.dumps(metrics))
    By = open_page(browser, write_report(folder))
    assert console_errors(browser) == []
    assert cell_text(browser, By, "good", "map", "est") == "0.000"
    assert "not estimable" in cell_text(browser, By, "good", "map", "not-estimable")
    heading = browser.find_element(By.CSS_SELECTOR, '#headline-table th[data-metric="map"]')
    assert "†" in heading.text and "0.830" in heading.text
    ndcg = browser.find_element(By.CSS_SELECTOR, f'#headline-table th[data-metric="ndcg@{K}"]')
    assert "†" not in ndcg.text and "0.950" in ndcg.text
    assert "Holm" in browser.find_element(By.ID, "differences-legend").text
    assert not browser.find_elements(By.CSS_SELECTOR, "#headline-table sup.sig")


@pytest.mark.parametrize("width", [1280, 900])
def test_a_query_link_scrolls_the_query_below_the_sticky_header(browser, pages, width: int):
    """``#query=QID`` (a link, a reload, a click on a row) puts the query's heading below the
    sticky header, whose height depends on how its title and links wrap at this width."""
    from eval.report.build import build_report

    browser.set_window_size(width, 900)
    qid = build_report(pages["human"]).telling_query()
    By = open_page(browser, pages["pages"]["human"], f"#query={qid}")

    def heading_below_header() -> tuple[float, float]:
        return browser.execute_script(
            "return [document.querySelector('header.top').getBoundingClientRect().bottom,"
            " document.querySelector('#query-detail h3').getBoundingClientRect().top];"
        )

    header_bottom, heading_top = heading_below_header()
    assert browser.execute_script("return window.scrollY") > 0  # it did scroll to the query
    assert heading_top >= header_bottom, (heading_top, header_bottom)
    row = browser.find_elements(By.CSS_SELECTOR, "#query-table tbody tr")[5]
    browser.execute_script("window.scrollTo(0, 0); arguments[0].click();", row)
    assert browser.find_element(By.ID, "query-detail").get_attribute("data-qid") == (
        row.get_attribute("data-qid")
    )
    header_bottom, heading_top = heading_below_header()
    assert heading_top >= header_bottom, (heading_top, header_bottom)


def test_the_metric_tables_fit_a_1280_pixel_window(browser, pages, tmp_path: Path):
    """Every metric column is visible at 1280 px, even with the longest notes a cell carries
    (a PPI++ estimate that was not estimable): a column past the edge of a container whose
    scrollbar is hidden (macOS, screenshots) looks like a missing metric."""
    import shutil

    folder = tmp_path / "long-notes"
    shutil.copytree(pages["human"], folder)
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["ppi"]["runs"]["good"]["map"]["ppi"] |= {
        "estimate": 0.0,
        "low": 0.0,
        "high": 0.05,
        "lam": 0.0,
        "method": "classical (t); PPI++ not estimable here: its estimate fell outside the range",
    }
    (folder / "metrics.json").write_text(json.dumps(metrics))
    browser.set_window_size(1280, 900)
    for page in (pages["pages"]["human"], pages["pages"]["main_job"], write_report(folder)):
        open_page(browser, page)
        for table in ("headline-table", "differences-table"):
            fits = browser.execute_script(
                "const t = document.getElementById(arguments[0]), box = t.parentElement;"
                "return {right: t.getBoundingClientRect().right,"
                " edge: Math.min(box.getBoundingClientRect().right,"
                "   document.documentElement.clientWidth),"
                " columns: t.querySelectorAll('thead th').length,"
                " scrolls: getComputedStyle(box).overflowX};",
                table,
            )
            assert fits["columns"] >= 6 or table == "differences-table"
            assert fits["right"] <= fits["edge"] + 0.5, (page, table, fits)
            assert fits["scrolls"] == "auto"  # narrower windows scroll inside the container


def test_the_two_human_values_of_a_cell_say_what_each_is(browser, pages):
    """A headline cell of the main job carries two values under people's judgments: the
    human-only estimate over the judged queries and the mean over every query (the estimand);
    each is labelled, and the legend says why they differ."""
    summary = json.loads((pages["main_job"] / "summary.json").read_text())
    metrics = json.loads((pages["main_job"] / "search" / "metrics.json").read_text())
    judged = metrics["ppi"]["judged_queries"]
    By = open_page(browser, pages["pages"]["main_job"])
    cell = f'#headline-table td[data-run="good"][data-metric="ndcg@{K}"]'
    only = browser.find_element(By.CSS_SELECTOR, f"{cell} .human-only")
    every = browser.find_element(By.CSS_SELECTOR, f"{cell} .human-all")
    parent = "return arguments[0].parentElement.textContent;"
    assert browser.execute_script(parent, only).startswith(f"human only, {judged} judged queries")
    assert browser.execute_script(parent, every).startswith("people, every query")
    assert every.text == f"{summary['human_all_queries']['good'][f'ndcg@{K}']:.3f}"
    legend = browser.find_element(By.ID, "headline-legend").text
    assert f"the {judged} judged queries alone" in legend
    assert "People, every query" in legend and "are a sample" in legend
