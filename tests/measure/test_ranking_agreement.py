"""System ranking agreement (eval.ranking_agreement) when the reference could not judge every hit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import InputError
from data.beir import read_corpus, read_qrels, write_trec_run

K = 5


def three_runs(adi_dir: Path, root: Path) -> dict[str, dict[str, dict[str, float]]]:
    """good (relevant documents first), middling and bad runs over every judged ADI query."""
    qrels = read_qrels(adi_dir / "qrels.tsv")
    others = sorted(read_corpus(adi_dir / "corpus.jsonl"))
    runs: dict[str, dict[str, dict[str, float]]] = {"good": {}, "middling": {}, "bad": {}}
    for qid, judged in sorted(qrels.items()):
        relevant = sorted(d for d, grade in judged.items() if grade)
        filler = [d for d in others if d not in judged][: 2 * K]
        orders = {
            "good": relevant + filler,
            "middling": filler[:2] + relevant + filler[2:],
            "bad": filler + relevant,
        }
        for name, order in orders.items():
            runs[name][qid] = {d: float(len(order) - i) for i, d in enumerate(order)}
    for name, run in runs.items():
        write_trec_run(root / f"{name}.trec", run)
    return runs


def teacher_judgments(adi_dir: Path, runs: dict, path: Path) -> dict[str, int]:
    """The runs' top k judged as the qrels say, except for an unusable reply on every fifth
    pair (an error record), one pair never judged, and every pair of query 1 unusable."""
    from data.beir import ranked

    qrels = read_qrels(adi_dir / "qrels.tsv")
    pairs = sorted(
        {(q, d) for run in runs.values() for q, s in run.items() for d, _ in ranked(s)[:K]}
    )
    lines, counts = [], {"error": 0, "absent": 0}
    for i, (qid, doc_id) in enumerate(pairs):
        record = {"qid": qid, "query": "x", "doc_id": doc_id, "text": "t"}
        if i == 3:
            counts["absent"] += 1
            continue
        if i % 5 == 0 or qid == "1":
            counts["error"] += 1
            lines.append({**record, "error": "unparseable reply: 'I think it might be'"})
        else:
            lines.append({**record, "grade": 3 if qrels[qid].get(doc_id) else 0})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return {**counts, "pairs": len(pairs)}


def test_pairs_the_reference_could_not_judge_are_left_out_counted_and_named(
    adi_dir: Path, tmp_path: Path, capsys
):
    """The README's own-corpus run stopped at its last stage on the first unusable reply
    ('no judgment for query ...'); now those pairs leave every run and the count is reported."""
    from measure.metrics.ranking_agreement import RankingAgreement, main

    runs = three_runs(adi_dir, tmp_path)
    judgments = tmp_path / "teacher.jsonl"
    counts = teacher_judgments(adi_dir, runs, judgments)
    reference = f"judgments:{judgments}"
    main(
        [
            "--runs", *(str(tmp_path / f"{name}.trec") for name in runs),
            "--corpus", str(adi_dir), "--labelers", f"qrels:{adi_dir / 'qrels.tsv'}",
            "--reference", reference, "--metric", f"ndcg@{K}", "--k", str(K),
            "--out", str(tmp_path / "agreement"),
        ]
    )  # fmt: skip
    result = RankingAgreement.read(tmp_path / "agreement" / "agreement.json")
    left_out = result.left_out
    assert left_out.pairs == counts["error"] + counts["absent"]
    assert left_out.of_pairs == counts["pairs"]
    assert left_out.reasons == {
        f"{reference}: unusable reply": counts["error"],
        f"{reference}: not judged": counts["absent"],
    }
    assert left_out.queries == ["1"]  # every hit of query 1 was an unusable reply
    # The qrels labeler scores the same condensed lists, so it ranks the systems as the
    # reference does, and the good run comes first.
    assert result.agreement[f"qrels:{adi_dir / 'qrels.tsv'}"].kendall_tau == 1.0
    assert result.reference_ranking == ["good", "middling", "bad"]
    out = capsys.readouterr().out
    assert f"note: {left_out.pairs} of the {counts['pairs']} pairs in the runs' top k" in out
    assert "1 of 35 queries lost every hit of a run" in out


def test_the_metric_pipeline_stays_strict_about_an_explicit_judgments_labeler(tmp_path: Path):
    from measure.labelers import Hit, make_labeler

    path = tmp_path / "j.jsonl"
    path.write_text(json.dumps({"qid": "q", "query": "x", "doc_id": "d1", "text": "t", "grade": 2}))
    labeler = make_labeler(f"judgments:{path}")
    assert labeler.cannot_label("q", "d2") == "not judged"
    with pytest.raises(InputError, match="no judgment for query 'q', document 'd2'"):
        labeler.label("q", "x", [Hit("d2", "t")])
