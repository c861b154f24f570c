"""``relevance-grader report --input FOLDER``: the HTML report of an evaluation (see eval.report).

relevance-grader report --input runs/search/cmp                  # writes runs/search/cmp/report.html
relevance-grader report --input runs/main --out runs/shots/report.html --screenshot runs/shots/report.png
relevance-grader report --input runs/zoo                          # a relevance-grader zoo folder
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.cli import bounded, parse_config, run_main
from core.errors import InputError
from eval.report.build import ReportOptions, build_report
from eval.report.page import (
    is_png,
    output_path,
    refuse_foreign_file,
    screenshot,
    write_page,
)


@dataclass
class ReportConfig:
    input: str = field(
        default="",
        metadata={
            "help": "A relevance-grader search output folder, a main-job run folder or a "
            "relevance-grader zoo output folder (its leaderboard.json)."
        },
    )
    out: str | None = field(default=None, metadata={"help": "Default: INPUT/report.html."})
    corpus: str | None = field(
        default=None,
        metadata={"help": "BEIR folder or corpus.jsonl of the documents (default: as evaluated)."},
    )
    queries: str | None = field(default=None, metadata={"help": "queries.jsonl (with --corpus)."})
    human: str | None = field(
        default=None,
        metadata={
            "help": "Human qrels shown beside the labels (default: those the evaluation used)."
        },
    )
    agreement: str | None = field(
        default=None,
        metadata={
            "help": "A relevance-grader ranking-agreement agreement.json (the main job's is found)."
        },
    )
    max_queries: int = bounded(1000, 0, help="Queries whose hits and documents are embedded.")
    text_chars: int = bounded(600, 1, help="Characters of each document shown.")
    screenshot: str | None = field(
        default=None,
        metadata={"help": "Also write a PNG of the page drawn by headless Chromium (docs)."},
    )
    screenshot_size: list[int] = field(
        default_factory=lambda: [1280, 1600], metadata={"help": "Width and height in pixels."}
    )
    screenshot_at: str = field(
        default="",
        metadata={
            "help": "What the screenshot shows: the top of the page (empty), a whole section "
            "(headline, queries, agreement, leaderboard, ranking, held-out, provenance), "
            "query=QID (its hits) "
            "or query (the judged query where labeler and people disagree most)."
        },
    )

    def __post_init__(self) -> None:
        if len(self.screenshot_size) != 2 or min(self.screenshot_size) < 100:
            raise InputError(
                f"screenshot_size: expected a width and a height >= 100, got {self.screenshot_size}"
            )


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([ReportConfig], args)
    if not config.input:
        raise InputError(
            "input: give --input FOLDER (a relevance-grader search output, a main-job run or a "
            "zoo output)"
        )
    if not Path(config.input).is_dir():
        raise FileNotFoundError(f"input: {config.input} is not a folder")
    options = ReportOptions(
        corpus=config.corpus,
        queries=config.queries,
        human=config.human,
        agreement=config.agreement,
        max_queries=config.max_queries,
        text_chars=config.text_chars,
    )
    inputs = [
        ("corpus", config.corpus),
        ("queries", config.queries),
        ("human", config.human),
        ("agreement", config.agreement),
    ]
    target = output_path(config.input, config.out, inputs)
    if config.screenshot:
        refuse_foreign_file("--screenshot", Path(config.screenshot), is_png)
    report = build_report(config.input, options)
    page = write_page(report, target)
    print(f"wrote {page} ({page.stat().st_size / 1e6:.2f} MB)")
    for note in report.notes:
        print(f"note: {note}")
    if config.screenshot:
        width, height = config.screenshot_size
        at = config.screenshot_at
        if at == "query":
            at = f"query={report.telling_query()}"
        print(f"wrote {screenshot(page, config.screenshot, width, height, at)}")


if __name__ == "__main__":
    run_main(main)
