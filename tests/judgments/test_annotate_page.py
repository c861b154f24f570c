"""The judging page in headless Chromium, against the real server process: a person judges by
keyboard, the server is killed and restarted between two judgments, undo, two assessors (each
with a secret link and an order of their own) and an adjudicator, and the labeler's label kept
out of the page, its DOM and every answer it gets until the session is finished.

``UPDATE_SCREENSHOTS=1`` makes the first test write docs/judging-page.png (the page on TREC DL
2019 passages)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from data.beir import read_qrels, write_trec_run
from tests.browser import console_errors, network_requests
from tests.judgments.test_annotate import annotate_args, make_inputs

REPO = Path(__file__).resolve().parents[2]
TREC_DL = REPO / "data" / "collections" / "trec-dl-2019-passage"
pytestmark = pytest.mark.browser


class Server:
    """``relevance-grader annotate`` as a user runs it, on a port of its own; ``links`` holds the
    secret link it printed for each assessor."""

    def __init__(self, args: list[str]) -> None:
        self.args, self.process, self.port = args, None, 0
        self.links: dict[str, str] = {}

    def start(self, *extra: str) -> str:
        command = [sys.executable, "-m", "core.commands", "annotate", *self.args, *extra]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port)],
            cwd=REPO,
            env=os.environ | {"PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines, self.links = [], {}
        for line in self.process.stdout:
            lines.append(line)
            if line.startswith("open http://"):  # open URL?token=TOKEN as NAME
                _, link, _, name = line.split()
                self.links[name] = link
            elif self.links:
                url = next(iter(self.links.values())).split("?")[0]
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


def open_page(driver, link: str) -> None:
    driver.get(link)
    wait_for(driver, lambda d: judged_count(d) >= 0 and shown_hit(d)[0])


def api_answers(driver) -> list[tuple[str, str]]:
    """(URL, body) of every /api/ answer the page got since the last call (DevTools' log)."""
    answers = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") != "Network.responseReceived":
            continue
        url = message["params"]["response"]["url"]
        if "/api/" in url:
            request = {"requestId": message["params"]["requestId"]}
            body = driver.execute_cdp_cmd("Network.getResponseBody", request)["body"]
            answers.append((url, body))
    return answers


def labeler_seen(driver, answers: list[tuple[str, str]]) -> list[str]:
    """Where anything of the labeler shows: the DOM (hidden parts too) or an answer's body."""
    html = driver.execute_script("return document.querySelector('main').innerHTML")
    found = ["DOM"] if "P = 0." in html or "labeler agrees" in html or "<table" in html else []
    return found + [url for url, body in answers if '"labeler"' in body or '"score"' in body]


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
    (root / "labels" / "per_query.json").write_text(
        json.dumps({"format_version": 1, "runs": labels})
    )
    return {"collection": TREC_DL, "a": root / "bm25.trec", "b": root / "dense.trec"}


def test_a_person_judges_ten_hits_by_keyboard_and_the_qrels_hold_exactly_those(
    browser, server, tmp_path: Path
):
    from judgments.annotate.app import STOP_WORDS

    inputs = trec_dl_inputs(tmp_path)
    out = tmp_path / "out"
    queries = ["--queries", "47923", "1063750", "--labels", str(tmp_path / "labels")]
    judging = server(annotate_args(inputs, out, *queries, "--assessor", "alice"))
    url = judging.start()
    open_page(browser, judging.links["alice"])
    marks = [m.text.lower() for m in browser.find_elements("css selector", "#text mark")]
    query = browser.find_element("id", "query").text.lower()
    assert marks and all(any(m.startswith(w[:4]) for w in query.split()) for m in marks)
    assert not set(marks) & STOP_WORDS
    expected = {}
    for i in range(10):
        hit = shown_hit(browser)
        assert hit not in expected  # the next hit, never one already judged
        press(browser, str(i % 4), expect_judged=i + 1)
        expected[hit] = i % 4
    # A query is done, the session is not: nothing of the labeler is in the page.
    assert labeler_seen(browser, api_answers(browser)) == []
    # The work left, in interval widths: after one finished query, when the width will show.
    width = browser.find_element("id", "progress-width").text
    assert "ndcg@5" in width and "after 2 fully graded queries" in width
    qrels = read_qrels(out / "qrels.txt")
    assert {(q, d): g for q, docs in qrels.items() for d, g in docs.items()} == expected
    records = lines_of(out / "judgments.jsonl")
    assert len(records) == 10 and {r["assessor"] for r in records} == {"alice"}
    assert all(r["seconds"] > 0 and r["text"] and r["time"] for r in records)
    session = json.loads((out / "session.json").read_text())
    assert (session["highlight"], session["reveal"], session["assessors"]) == (
        True,
        "end",
        ["alice"],
    )
    assert console_errors(browser) == [] and network_requests(browser, (url,)) == []
    if os.environ.get("UPDATE_SCREENSHOTS"):
        browser.set_window_size(1100, 1250)
        browser.save_screenshot(str(REPO / "docs" / "judging-page.png"))


def test_the_server_killed_between_two_judgments_resumes_with_nothing_lost_or_doubled(
    browser, server, tmp_path: Path
):
    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    judging = server(annotate_args(inputs, out, "--queries", "q1", "q2", "--assessor", "alice"))
    judging.start()
    link = judging.links["alice"]
    open_page(browser, link)
    seen = []
    for i in range(3):
        seen.append(shown_hit(browser))
        press(browser, "3", expect_judged=i + 1)
    judging.kill()
    seen.append(shown_hit(browser))
    press(browser, "1")  # made while the server is down: the page keeps it and retries
    wait_for(browser, lambda d: "not answering" in d.find_element("id", "status").text)
    # Keys pressed until then are refused where the assessor sees it, not silently dropped (the
    # page still shows the same hit, so a grade now would be read as that hit's).
    press(browser, "2")
    press(browser, "c")
    wait_for(
        browser, lambda d: "Not taken meanwhile: 2 keys" in d.find_element("id", "status").text
    )
    judging.start()  # same port, same folder, the same link (the token is the session's)
    assert judging.links["alice"] == link
    wait_for(browser, lambda d: judged_count(d) == 4)
    browser.get(link)  # a closed and reopened page resumes too
    wait_for(browser, lambda d: judged_count(d) == 4)
    seen.append(shown_hit(browser))
    press(browser, "0", expect_judged=5)
    records = lines_of(out / "judgments.jsonl")
    assert [(r["qid"], r["doc_id"]) for r in records] == seen  # in order, none doubled
    assert [r["grade"] for r in records] == [3, 3, 3, 1, 0]


def test_undo_appends_a_line_and_shows_the_hit_again(browser, server, tmp_path):
    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    judging = server(annotate_args(inputs, out, "--queries", "q1", "--assessor", "alice"))
    judging.start()
    open_page(browser, judging.links["alice"])
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
    lines = lines_of(out / "judgments.jsonl")  # nothing rewritten: the undo is a line
    assert [line.get("grade") for line in lines] == [3, 1, None, 2]
    assert lines[2]["undo"] == lines[1]["ref"]
    # "I can't tell" and "judge later" are recorded without a grade.
    third = shown_hit(browser)
    press(browser, "c", expect_judged=3)
    fourth = shown_hit(browser)
    press(browser, "l")
    wait_for(browser, lambda d: shown_hit(d) != fourth)
    lines = lines_of(out / "judgments.jsonl")
    assert [(line["doc_id"], line["verdict"]) for line in lines[-2:]] == [
        (third[1], "cannot_tell"),
        (fourth[1], "later"),
    ]
    assert all("grade" not in line for line in lines[-2:])
    assert third[1] not in read_qrels(out / "qrels.txt")[first[0]]


def test_two_assessors_their_own_orders_their_kappa_and_an_adjudicator(
    browser, server, tmp_path, capsys
):
    from sklearn.metrics import cohen_kappa_score

    from judgments.annotate.agreement import main as agreement

    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    judging = server(annotate_args(inputs, out, "--queries", "q1", "--assessors", "alice", "bob"))
    judging.start()
    assert set(judging.links) == {"alice", "bob"}
    assert judging.links["alice"] != judging.links["bob"]
    docs = sorted(_pool_docs(out))  # each assessor's grade of each document, in id order
    given = {"alice": [3, 2, 0, 1, 0, 2, 3, 0], "bob": [3, 1, 0, 1, 0, 2, 2, 0]}
    order = {}
    for name in given:
        open_page(browser, judging.links[name])
        assert browser.find_element("id", "assessor").text == name
        order[name] = []
        for i in range(8):
            hit = shown_hit(browser)
            order[name].append(hit)
            press(browser, str(given[name][docs.index(hit[1])]), expect_judged=i + 1)
    assert sorted(order["alice"]) == sorted(order["bob"])
    assert order["alice"] != order["bob"]  # the same hits, each in an order of their own
    agreement(["--judgments", str(out), "--out", str(tmp_path / "agreement")])
    result = json.loads((tmp_path / "agreement.json").read_text())
    relevant = {name: [int(g >= 2) for g in grades] for name, grades in given.items()}
    pair = result["pairs"]["alice vs bob"]
    assert pair["kappa"] == pytest.approx(cohen_kappa_score(relevant["alice"], relevant["bob"]))
    assert pair["weighted_kappa"] == pytest.approx(
        cohen_kappa_score(given["alice"], given["bob"], weights="quadratic")
    )
    assert {r["doc_id"] for r in result["disagreements"]} == {docs[1], docs[6]}
    assert "Cohen's κ" in capsys.readouterr().out
    # The adjudicator sees only the two disagreements; their grades go into the qrels.
    judging.kill()
    judging.args = ["--out", str(out), "--adjudicate", "true", "--assessor", "carol"]
    judging.start()
    assert set(judging.links) == {"carol"}  # alice and bob get no adjudicator's link
    open_page(browser, judging.links["carol"])
    assert browser.find_element("id", "progress-overall").text.startswith("0 of 2 hits")
    settled = {docs[1]: 2, docs[6]: 3}
    for i in range(2):
        press(browser, str(settled[shown_hit(browser)[1]]), expect_judged=i + 1)
    qrels = read_qrels(out / "qrels.txt")["q1"]
    assert [qrels[docs[i]] for i in (1, 6)] == [2, 3]
    assert qrels[docs[0]] == 3 and qrels[docs[3]] == 1


def _pool_docs(out: Path) -> list[str]:
    return json.loads((out / "session.json").read_text())["pool"][0][1]


def test_the_labeler_stays_out_of_the_page_until_the_session_is_finished_even_after_undo(
    browser, server, tmp_path: Path
):
    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    labels = str(tmp_path / "labels")
    judging = server(annotate_args(inputs, out, "--queries", "q1", "--labels", labels))
    url = judging.start()
    (name,) = judging.links
    open_page(browser, judging.links[name])
    for i in range(8):
        assert labeler_seen(browser, api_answers(browser)) == []
        assert browser.find_element("id", "reveal-offer").is_displayed() is False
        press(browser, "2" if i % 2 else "0", expect_judged=i + 1)
    # Finished: an explicit step offers the reveal; undo before it shows the hit, no verdict.
    wait_for(browser, lambda d: d.find_element("id", "reveal-offer").is_displayed())
    press(browser, "u", expect_judged=7)
    assert shown_hit(browser)[1] and labeler_seen(browser, api_answers(browser)) == []
    press(browser, "3", expect_judged=8)
    assert labeler_seen(browser, api_answers(browser)) == []
    browser.find_element("id", "reveal").click()
    wait_for(browser, lambda d: d.find_element("id", "summary").is_displayed())
    summary = browser.find_element("id", "summary").text
    assert "The labeler agrees with you on" in summary and "P = 0.90" in summary
    assert console_errors(browser) == [] and network_requests(browser, (url,)) == []
    # After the reveal, undo is refused: no hit is ever served beside a verdict.
    press(browser, "u")
    wait_for(browser, lambda d: "final" in d.find_element("id", "status").text)
    assert browser.find_element("id", "hit").is_displayed() is False
    assert browser.find_element("id", "summary").is_displayed() is False
    assert lines_of(out / "judgments.jsonl")[-1]["reveal"] == "session"
    assert [e for e in console_errors(browser) if "/api/undo" not in e or "409" not in e] == []


def test_the_training_mode_shows_each_querys_verdicts_before_the_next_hit(
    browser, server, tmp_path: Path
):
    inputs = make_inputs(tmp_path)
    out = tmp_path / "out"
    args = ["--queries", "q1", "q2", "--labels", str(tmp_path / "labels"), "--reveal", "per-query"]
    judging = server(annotate_args(inputs, out, *args, "--assessor", "alice"))
    judging.start()
    open_page(browser, judging.links["alice"])
    for i in range(8):
        press(browser, "2", expect_judged=i + 1)
    wait_for(browser, lambda d: d.find_element("id", "summary").is_displayed())
    assert "Query done" in browser.find_element("id", "summary").text
    assert browser.find_element("id", "hit").is_displayed() is False  # judging waits
    time.sleep(1.5)  # reading the verdicts is not time spent judging the next hit
    press(browser, "\ue007")  # Enter: the next query, and the table is gone from the page
    wait_for(browser, lambda d: d.find_element("id", "hit").is_displayed())
    assert labeler_seen(browser, []) == []
    press(browser, "1", expect_judged=9)
    assert lines_of(out / "judgments.jsonl")[-1]["seconds"] < 1.0


def test_a_page_without_its_token_says_which_link_to_use(browser, server, tmp_path: Path):
    inputs = make_inputs(tmp_path)
    judging = server(annotate_args(inputs, tmp_path / "out", "--queries", "q1"))
    url = judging.start()
    browser.get(f"{url}?assessor=alice")
    status = lambda d: d.find_element("id", "status").text  # noqa: E731
    wait_for(browser, lambda d: "your own link" in status(d))
    assert "?assessor=alice no longer picks who judges" in status(browser)
    assert browser.find_element("id", "hit").is_displayed() is False
