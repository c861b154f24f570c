"""The report's labeler leaderboard (relevance-grader zoo): its data from leaderboard.json (a
main-job run's zoo/, summary.json's copy, or a zoo output folder given as --input), and the page
that shows it in headless Chromium."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from core.errors import InputError
from eval.report.__main__ import main as report_main
from eval.report.build import build_report
from eval.report.leaderboard import leaderboard_section
from eval.report.leaderboard_markdown import NO_INTERVAL, UNDEFINED, labelers_legend
from eval.report.page import write_report
from measure.classification.summaries import JobSummary
from measure.zoo.record import Leaderboard
from tests.browser import console_errors, network_requests
from tests.eval.report_inputs import make_leaderboard, make_main_job_folder, make_search_folders


@pytest.fixture(scope="module")
def folders(adi_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An eval.search folder, a main-job run with zoo/leaderboard.json, and a zoo output folder."""
    root = tmp_path_factory.mktemp("report-leaderboard")
    found = make_search_folders(adi_dir, root)
    main_job = make_main_job_folder(found["human"], adi_dir, root)
    make_leaderboard().write(main_job / "zoo" / Leaderboard.FILE)
    zoo = root / "zoo"
    make_leaderboard().write(zoo / Leaderboard.FILE)
    (zoo / "leaderboard.md").write_text("the zoo's Markdown\n")
    return {"search": found["human"], "main_job": main_job, "zoo": zoo}


def test_the_section_is_the_leaderboard_record_with_its_words():
    board = make_leaderboard()
    section = leaderboard_section(board, "zoo/leaderboard.json")
    # Best τ first, the undefined one last (the Markdown leaderboard's order).
    order = [(row.labeler, row.reading) for row in section.rows]
    assert order == [("grader", "labels"), ("grader", "scores"), ("constant", "labels")]
    labels, scores, constant = section.rows
    assert (scores.tau.value, scores.tau.low, scores.tau.high) == (0.667, 0.333, 1.0)
    assert scores.tau.note is None
    # A τ without an interval, and one without a value, say why in the Markdown's words.
    assert (labels.tau.value, labels.tau.low, labels.tau.note) == (1.0, None, NO_INTERVAL)
    assert constant.tau.value is None and constant.tau.note == UNDEFINED
    assert constant.top1 is None and constant.largest_error is None
    # The PPI++ columns: one per number of judged queries, empty where a reading has no row.
    assert section.ppi_sizes == [10, 20]
    assert [d and d.mean for d in labels.ppi] == [0.85, None]
    assert labels.ppi[0].undefined == 3
    assert constant.ppi[0].mean is None and constant.ppi[0].note == UNDEFINED
    assert scores.top3 == 3 and labels.threshold == 0.42 and labels.share_relevant == 0.31
    assert scores.largest_error.system == "grader-rerank"
    lift = scores.self_preference.lift
    assert (lift.value, lift.low, lift.high) == (1.0, 0.5, 2.0)
    assert scores.self_preference.own_systems == ["grader-rerank"]
    # The systems, best by people first, each labeler under its primary reading.
    assert [s.name for s in section.systems] == ["dense", "grader-rerank", "bm25", "random"]
    assert section.primary_readings == {"constant": "labels", "grader": "scores"}
    dense = section.systems[0]
    assert dense.labelers == {"constant": 1.0, "grader": 0.6}
    assert dense.human == {"ndcg@10": 0.55, "p@10": 0.275, "map@10": 0.55 / 3}
    assert section.people_only[1].mean == 0.86
    assert section.skipped == {"dense-hnsw": "hnswlib is not installed"}
    # The legend is the Markdown's, less its emphasis; the marks and the systems are explained.
    assert section.legend == labelers_legend(board).replace("*", "")
    assert "labels: the labeler's verdicts" in section.legend
    assert UNDEFINED in section.marks and NO_INTERVAL in section.marks
    for column in ("Human ndcg@10, p@10, map@10", "Judged@10"):
        assert column in section.systems_legend


def test_a_main_job_run_shows_its_leaderboard(folders, tmp_path: Path):
    report = build_report(folders["main_job"])
    assert report.leaderboard is not None
    assert report.leaderboard.source.endswith("zoo/leaderboard.json")
    assert report.leaderboard.rows[0].tau.value == 1.0
    assert report.headline is not None  # the rest of the page stays
    # Without zoo/ (moved, or another release's layout), summary.json's copy.
    run = tmp_path / "run"
    shutil.copytree(folders["main_job"], run)
    shutil.rmtree(run / "zoo")
    assert build_report(run).leaderboard is None
    summary = JobSummary.read(run / JobSummary.FILE)
    summary.leaderboard = make_leaderboard()
    summary.write(run / JobSummary.FILE)
    section = build_report(run).leaderboard
    assert section is not None and "summary.json" in section.source
    assert build_report(folders["search"]).leaderboard is None  # eval.search has none


def test_a_zoo_folder_is_an_input_of_its_own(folders, tmp_path: Path, capsys):
    report = build_report(folders["zoo"])
    assert report.kind == "zoo" and report.headline is None and report.queries == []
    assert report.leaderboard.queries == 43
    assert report.provenance.settings["labelers"] == {
        "constant": "constant:",
        "grader": "grader:runs/main/export",
    }
    out = tmp_path / "zoo.html"
    report_main(["--input", str(folders["zoo"]), "--out", str(out)])
    page = out.read_text()
    assert "report-data" in page and "Labelers ranked by how they rank" in page
    assert '"leaderboard":"\\u003csvg' in page  # the τ plot, embedded with the data
    assert f"wrote {out}" in capsys.readouterr().out
    # The page may not replace the leaderboard it reads.
    with pytest.raises(ValueError, match="would replace"):
        write_report(folders["zoo"], folders["zoo"] / Leaderboard.FILE)


def test_a_leaderboard_of_another_version_is_one_line_naming_it(folders, tmp_path: Path):
    import json

    zoo = tmp_path / "zoo"
    zoo.mkdir()
    data = json.loads((folders["zoo"] / Leaderboard.FILE).read_text())
    (zoo / Leaderboard.FILE).write_text(json.dumps(data | {"format_version": 99}))
    with pytest.raises(InputError, match=r"leaderboard\.json.*format version 99"):
        build_report(zoo)


def test_a_folder_without_anything_to_report_names_the_three_kinds(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="relevance-grader zoo output"):
        build_report(tmp_path)


# ---- the page in headless Chromium ---------------------------------------------------------


def open_page(browser, page: Path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(page.resolve().as_uri())
    WebDriverWait(browser, 20).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true"
    )
    return By


def row_cell(browser, By, labeler: str, reading: str, key: str):
    selector = (
        f'#leaderboard-table tr[data-labeler="{labeler}"][data-reading="{reading}"] '
        f'td[data-key="{key}"]'
    )
    return browser.find_element(By.CSS_SELECTOR, selector)


@pytest.mark.browser
def test_the_zoo_page_shows_the_leaderboard_offline(browser, folders):
    By = open_page(browser, write_report(folders["zoo"]))
    assert console_errors(browser) == []
    assert network_requests(browser) == []
    assert browser.find_element(By.ID, "leaderboard").is_displayed()
    for absent in ("headline", "queries", "ranking", "held-out"):
        assert not browser.find_element(By.ID, absent).is_displayed()
    nav = browser.find_element(By.ID, "nav").text
    assert "Leaderboard" in nav and "Headline" not in nav
    title = browser.find_element(By.ID, "leaderboard-title").text
    assert title == "Labelers ranked by how they rank 4 systems"
    # A τ and its interval, as the record has them.
    tau = row_cell(browser, By, "grader", "scores", "tau")
    assert tau.find_element(By.CLASS_NAME, "est").text == "0.67"
    assert tau.find_element(By.CLASS_NAME, "ci").text == "[0.33, 1.00]"
    # Without an interval, and without a value, the cell says why.
    assert NO_INTERVAL in row_cell(browser, By, "grader", "labels", "tau").text
    assert row_cell(browser, By, "constant", "labels", "tau").text == UNDEFINED
    assert row_cell(browser, By, "constant", "labels", "top1").text == "–"
    lift = row_cell(browser, By, "grader", "scores", "lift")
    assert lift.find_element(By.CLASS_NAME, "est").text == "1.0"
    assert "lifted" in lift.find_element(By.CLASS_NAME, "est").get_attribute("class")
    assert "(1 own)" in lift.text
    assert row_cell(browser, By, "grader", "labels", "ppi-20").text == "–"
    assert "3 of 200 draws tied" in row_cell(browser, By, "grader", "labels", "ppi-10").text
    assert row_cell(browser, By, "grader", "labels", "relevant").text == "31%"
    # The legend under the table: the Markdown's words, and the marks explained.
    legend = browser.find_element(By.ID, "leaderboard-legend").text
    assert legend == labelers_legend(make_leaderboard()).replace("*", "")
    marks = browser.find_element(By.ID, "leaderboard-marks").text
    assert UNDEFINED in marks and NO_INTERVAL in marks and "red" in marks
    people = browser.find_element(By.ID, "people-only").text
    assert "10 queries: τ 0.74 (0.54 to 0.84)" in people
    assert browser.find_element(By.CSS_SELECTOR, '[data-figure="leaderboard"] svg')
    dense = browser.find_element(By.CSS_SELECTOR, '#zoo-systems-table tr[data-system="dense"]')
    assert dense.find_element(By.CSS_SELECTOR, 'td[data-labeler="grader"]').text == "0.600"
    assert dense.find_element(By.CSS_SELECTOR, 'td[data-key="judged"]').text == "90%"
    assert "Not built: dense-hnsw" in browser.find_element(By.ID, "zoo-systems-legend").text


@pytest.mark.browser
def test_the_main_job_page_adds_the_leaderboard_section(browser, folders):
    By = open_page(browser, write_report(folders["main_job"]))
    assert console_errors(browser) == []
    assert browser.find_element(By.ID, "headline").is_displayed()
    assert browser.find_element(By.ID, "leaderboard").is_displayed()
    assert "Leaderboard" in browser.find_element(By.ID, "nav").text
    tau = row_cell(browser, By, "grader", "scores", "tau")
    assert tau.find_element(By.CLASS_NAME, "ci").text == "[0.33, 1.00]"
    source = browser.find_element(By.ID, "leaderboard-source").text
    assert "zoo/leaderboard.json" in source
    # Every column within a 1280-pixel window: one past the edge of a container whose scrollbar
    # is hidden (macOS, screenshots) looks like a missing column.
    browser.set_window_size(1280, 900)
    for table in ("leaderboard-table", "zoo-systems-table"):
        right, edge = browser.execute_script(
            "const t = document.getElementById(arguments[0]);"
            "return [t.getBoundingClientRect().right, Math.min("
            " t.parentElement.getBoundingClientRect().right,"
            " document.documentElement.clientWidth)];",
            table,
        )
        assert right <= edge + 0.5, (table, right, edge)


@pytest.mark.browser
def test_the_leaderboard_screenshot_draws_the_section(folders, tmp_path: Path):
    from PIL import Image

    from eval.report.browser import available
    from eval.report.page import screenshot

    if not available():
        pytest.skip("Chromium and chromedriver are not installed (bash install.sh dev)")
    page = write_report(folders["zoo"], tmp_path / "zoo.html")
    png = screenshot(page, tmp_path / "leaderboard.png", 1280, 900, "leaderboard")
    with Image.open(png) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
        assert image.width <= 1280 and image.height > 400
    assert colours is None or len(colours) > 8
