"""The judging page in headless Chromium, against the real server process: a person judges by
keyboard, the server is killed and restarted between two judgments, undo, two assessors and an
adjudicator, and the labeler's label kept out of view while judging.

``UPDATE_SCREENSHOTS=1`` makes the first test write docs/judging-page.png (the page on TREC DL
2019 passages)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data.beir import read_qrels, write_trec_run
from tests.browser import console_errors, network_requests
from tests.eval.test_annotate import annotate_args, make_inputs

REPO = Path(__file__).resolve().parents[2]
TREC_DL = REPO / "data" / "collections" / "trec-dl-2019-passage"
pytestmark = pytest.mark.browser


class Server:
    """``python -m eval.annotate`` as a user runs it, on a port of its own."""

    def __init__(self, args: list[str]) -> None:
        self.args, self.process, self.port = args, None, 0

    def start(self, *extra: str) -> str:
        command = [sys.executable, "-m", "eval.annotate", *self.args, *extra]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port)],
            cwd=REPO,
            env=os.environ | {"PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines = []
        for line in self.process.stdout:
            lines.append(line)
            if line.startswith("open http://"):
                url = line.split()[1].split("?")[0]
                self.port = int(url.rsplit(":", 1)[1].strip("/"))
                return url
        raise AssertionError("the server did not start:\n" + "".join(lines))

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()  # SIGKILL: no clean shutdown
            self.process.wait()


@pytest.fixture
def server():
    servers: list[Server] = []

    def make(args: list[str]) -> Server:
        servers.append(Server(args))
        return servers[-1]

    yield make
    for item in servers:
        item.kill()


def wait_for(driver, condition, timeout: float = 20):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d))


def judged_count(driver) -> int:
    text = driver.find_element("id", "progress-overall").text
    return int(text.split()[0]) if text[:1].isdigit() else -1


def shown_hit(driver) -> tuple[str, str]:
    hit = driver.find_element("id", "hit")
    return hit.get_attribute("data-qid"), hit.get_attribute("data-doc-id")


def press(driver, key: str, expect_judged: int | None = None) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(key).perform()
    if expect_judged is not None:
        wait_for(driver, lambda d: judged_count(d) == expect_judged)


def open_page(driver, url: str, assessor: str) -> None:
    driver.get(f"{url}?assessor={assessor}")
    wait_for(driver, lambda d: judged_count(d) >= 0 and shown_hit(d)[0])


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def trec_dl_inputs(root: Path) -> dict[str, Path]:
    """Two runs over two TREC DL 2019 queries, built from the NIST-judged passages (real texts)."""
    qrels = read_qrels(TREC_DL / "qrels.tsv")
    chosen = ["47923", "1063750"]
    labels: dict = {}
    for name, step in (("bm25", 1), ("dense", 2)):
        run = {
            q: {d: float(-i) for i, d in enumerate(sorted(qrels[q])[::step][:6])} for q in chosen
        }
        write_trec_run(root / f"{name}.trec", run)
        labels[name] = {
            q: {
                "hits": [
                    {"id": d, "relevant": qrels[q][d] >= 2, "score": 0.3 + 0.2 * qrels[q][d]}
                    for d in docs
                ]
            }
            for q, docs in run.items()
        }
    (root / "labels").mkdir()
    (root / "labels" / "per_query.json").write_text(json.dumps(labels))
    return {"collection": TREC_DL, "a": root / "bm25.trec", "b": root / "dense.trec"}


def test_a_person_judges_ten_hits_by_keyboard_and_the_qrels_hold_exactly_those(
    browser, server, tmp_path: Path
):
    inputs = trec_dl_inputs(tmp_path)
    out = tmp_path / "out"
    queries = ["--queries", "47923", "1063750", "--labels", str(tmp_path / "labels")]
    url = server(annotate_args(inputs, out, *queries)).start()
    open_page(browser, url, "alice")
    marks = [m.text.lower() for m in browser.find_elements("css selector", "#text mark")]
    query = browser.find_element("id", "query").text.lower()
    assert marks and all(any(m.startswith(w[:4]) for w in query.split()) for m in marks)
    expected = {}
    for i in range(10):
        hit = shown_hit(browser)
        assert hit not in expected  # the next hit, never one already judged
        press(browser, str(i % 4), expect_judged=i + 1)
        expected[hit] = i % 4
    # The first query is done: its summary sets the grades beside the labeler's.
    wait_for(browser, lambda d: "labeler agrees" in d.find_element("id", "summary").text)
    qrels = read_qrels(out / "qrels.txt")
    assert {(q, d): g for q, docs in qrels.items() for d, g in docs.items()} == expected
    records = lines_of(out / "judgments.jsonl")
    assert len(records) == 10 and {r["assessor"] for r in records} == {"alice"}
    assert all(r["seconds"] > 0 and r["text"] and r["time"] for r in records)
    assert console_errors(browser) == [] and network_requests(browser, (url,)) == []
    if os.environ.get("UPDATE_SCREENSHOTS"):
        browser.set_window_size(1100, 1250)
        browser.save_screenshot(str(REPO / "docs" / "judging-page.png"))


def test_the_server_killed_between_two_judgments_resumes_with_nothing_lost_or_doubled(
    browser, server, tmp_path: Path
):
    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    judging = server(annotate_args(inputs, out, "--queries", "q1", "q2"))
    url = judging.start()
    open_page(browser, url, "alice")
    seen = []
    for i in range(3):
        seen.append(shown_hit(browser))
        press(browser, "3", expect_judged=i + 1)
    judging.kill()
    seen.append(shown_hit(browser))
    press(browser, "1")  # made while the server is down: the page keeps it and retries
    wait_for(browser, lambda d: "not answering" in d.find_element("id", "status").text)
    judging.start()  # same port, same folder
    wait_for(browser, lambda d: judged_count(d) == 4)
    browser.get(f"{url}?assessor=alice")  # a closed and reopened page resumes too
    wait_for(browser, lambda d: judged_count(d) == 4)
    seen.append(shown_hit(browser))
    press(browser, "0", expect_judged=5)
    records = lines_of(out / "judgments.jsonl")
    assert [(r["qid"], r["doc_id"]) for r in records] == seen  # in order, none doubled
    assert [r["grade"] for r in records] == [3, 3, 3, 1, 0]


def test_undo_withdraws_the_last_judgment_and_shows_the_hit_again(browser, server, tmp_path):
    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    url = server(annotate_args(inputs, out, "--queries", "q1")).start()
    open_page(browser, url, "alice")
    first = shown_hit(browser)
    press(browser, "3", expect_judged=1)
    second = shown_hit(browser)
    press(browser, "1", expect_judged=2)
    press(browser, "u", expect_judged=1)
    assert shown_hit(browser) == second
    assert "Undone" in browser.find_element("id", "status").text
    assert read_qrels(out / "qrels.txt") == {first[0]: {first[1]: 3}}
    press(browser, "2", expect_judged=2)
    assert read_qrels(out / "qrels.txt") == {first[0]: {first[1]: 3, second[1]: 2}}
    assert [r["grade"] for r in lines_of(out / "judgments.jsonl")] == [3, 2]


def test_two_assessors_their_kappa_and_an_adjudicator(browser, server, tmp_path, capsys):
    from sklearn.metrics import cohen_kappa_score

    from eval.annotate.agreement import main as agreement

    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    judging = server(annotate_args(inputs, out, "--queries", "q1"))
    url = judging.start()
    grades = {"alice": [3, 2, 0, 1, 0, 2, 3, 0], "bob": [3, 1, 0, 1, 0, 2, 2, 0]}
    order = {}
    for name, given in grades.items():
        open_page(browser, url, name)
        order[name] = []
        for i, grade in enumerate(given):
            order[name].append(shown_hit(browser))
            press(browser, str(grade), expect_judged=i + 1)
    assert order["alice"] == order["bob"]  # the same hits, in the same order
    agreement(["--judgments", str(out), "--out", str(tmp_path / "agreement")])
    result = json.loads((tmp_path / "agreement.json").read_text())
    relevant = {name: [int(g >= 2) for g in given] for name, given in grades.items()}
    pair = result["pairs"]["alice vs bob"]
    assert pair["kappa"] == pytest.approx(cohen_kappa_score(relevant["alice"], relevant["bob"]))
    assert pair["weighted_kappa"] == pytest.approx(
        cohen_kappa_score(grades["alice"], grades["bob"], weights="quadratic")
    )
    disputed = {order["alice"][1][1], order["alice"][6][1]}
    assert {r["doc_id"] for r in result["disagreements"]} == disputed
    assert "Cohen's κ" in capsys.readouterr().out
    # The adjudicator sees only the two disagreements; their grades go into the qrels.
    judging.kill()
    judging.args = ["--out", str(out), "--adjudicate", "true"]
    url = judging.start()
    open_page(browser, url, "carol")
    assert browser.find_element("id", "progress-overall").text.startswith("0 of 2 hits")
    press(browser, "2", expect_judged=1)
    press(browser, "3", expect_judged=2)
    qrels = read_qrels(out / "qrels.txt")["q1"]
    assert [qrels[order["alice"][i][1]] for i in (1, 6)] == [2, 3]
    assert qrels[order["alice"][0][1]] == 3 and qrels[order["alice"][3][1]] == 1


def test_the_labelers_label_is_hidden_while_judging_and_shown_after_the_query(
    browser, server, tmp_path: Path
):
    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    labels = str(tmp_path / "labels")
    url = server(annotate_args(inputs, out, "--queries", "q1", "--labels", labels)).start()
    open_page(browser, url, "alice")
    for i in range(8):
        shown = browser.execute_script("return document.querySelector('main').innerHTML")
        assert "P = 0." not in shown and "labeler" not in shown  # not even hidden in the DOM
        assert browser.find_element("id", "summary").is_displayed() is False
        press(browser, "2" if i % 2 else "0", expect_judged=i + 1)
    wait_for(browser, lambda d: d.find_element("id", "summary").is_displayed())
    summary = browser.find_element("id", "summary").text
    assert "The labeler agrees with you on" in summary and "P = 0.90" in summary
    assert console_errors(browser) == [] and network_requests(browser, (url,)) == []
