"""One read of a run folder, every rendering made from it: the main job's report.md and page, the
README's block (relevance-grader readme), and the page data made twice from the same read."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from core.artifacts import Artifact
from eval.report.build import report_data
from eval.report.inputs import ZooInputs, job_summary, read_inputs
from eval.report.markdown import report_markdown
from eval.report.readme import main as readme_main
from eval.report.readme import results_table
from measure.classification.summaries import JobSummary
from tests.eval.report_inputs import make_leaderboard, make_main_job_folder, make_search_folders


@pytest.fixture(scope="module")
def run(adi_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("readme")
    return make_main_job_folder(make_search_folders(adi_dir, root)["human"], adi_dir, root)


@pytest.fixture
def reads(monkeypatch) -> dict[str, Counter]:
    """What is read while a test runs: read_inputs's calls, and each typed file parsed (every
    Artifact of the folder passes through from_data, named by its path)."""
    import eval.report.build as build_module
    import eval.report.inputs as inputs_module
    import eval.report.readme as readme_module

    counted: dict[str, Counter] = {"folders": Counter(), "files": Counter()}
    read_folder, parse = inputs_module.read_inputs, Artifact.from_data.__func__

    def counting_read(folder):
        counted["folders"][str(folder)] += 1
        return read_folder(folder)

    def counting_parse(cls, data, where):
        counted["files"][where] += 1
        return parse(cls, data, where)

    for module in (inputs_module, readme_module, build_module):  # each holds the name
        monkeypatch.setattr(module, "read_inputs", counting_read)
    monkeypatch.setattr(Artifact, "from_data", classmethod(counting_parse))
    return counted


def test_report_md_and_the_page_are_rendered_from_one_read_of_the_run(run: Path, tmp_path, reads):
    from eval.jobs.pipeline import Pipeline, PipelineConfig

    job = tmp_path / "job"
    shutil.copytree(run, job)
    Pipeline(PipelineConfig(run_dir=str(job))).write_reports()
    assert list(reads["folders"].values()) == [1]
    assert reads["files"][str(job / JobSummary.FILE)] == 1
    assert max(reads["files"].values()) == 1  # no file of the run parsed twice
    summary = JobSummary.read(job / JobSummary.FILE)
    assert (job / "report.md").read_text(encoding="utf-8") == report_markdown(summary)
    assert "<title>Main job job</title>" in (job / "report.html").read_text(encoding="utf-8")


def test_the_readme_block_is_rendered_from_one_read_of_the_run(run: Path, capsys, reads):
    readme_main(["--run_dir", str(run)])
    assert list(reads["folders"].values()) == [1]
    assert max(reads["files"].values()) == 1
    assert capsys.readouterr().out == results_table(JobSummary.read(run / JobSummary.FILE))


def test_every_rendering_reads_the_same_model(run: Path, tmp_path: Path):
    """report.md, the README's block and the page from one read: the page's data, made twice,
    is the same (withholding too-small PPI++ samples works on a copy), and the read stays as read."""
    folder = tmp_path / "few-judged"
    shutil.copytree(run, folder)
    path = folder / "search" / "metrics.json"
    metrics = json.loads(path.read_text())
    metrics["ppi"]["judged_queries"] = 2  # fewer than an interval needs: withheld on the page
    path.write_text(json.dumps(metrics))
    inputs = read_inputs(folder)
    summary = job_summary(inputs)
    before = inputs.metrics.model_dump()
    first, again = report_data(inputs), report_data(inputs)
    for report in (first, again):
        report.provenance.page = {}  # this page's own date and machine
    assert first.to_dict() == again.to_dict()
    assert "Too few human judgments for an interval" in first.headline.notice
    assert inputs.metrics.model_dump() == before
    assert report_markdown(summary).startswith("# Main job report")
    assert results_table(summary).startswith(f"{summary.folds}-fold cross-validation by query")


def test_a_folder_without_a_summary_has_no_job_summary(run: Path, tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="no summary"):
        job_summary(read_inputs(run / "search"))  # an eval.search folder
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    make_leaderboard().write(zoo / "leaderboard.json")
    inputs = read_inputs(zoo)
    assert isinstance(inputs, ZooInputs) and inputs.leaderboard == make_leaderboard()
    with pytest.raises(FileNotFoundError, match="no summary"):
        job_summary(inputs)
