"""Agreement of a judge with human judgments (or with another judge).

    relevance-grader judge-agreement --judgments runs/labels/smollm2.jsonl \\
        --qrels data/collections/trec-dl-2019-passage/qrels.tsv --out runs/labels/agreement
    relevance-grader judge-agreement --judgments a.jsonl --reference b.jsonl

Reports Cohen's kappa on the binary label and, when both sides have 0-3 grades, the
quadratic-weighted kappa on grades; the confusion matrix; precision / recall / F1 of the judge's
binary label against the reference; ROC-AUC when the judge gives P(relevant); and a per-query
breakdown. Writes ``OUT.md`` and ``OUT.json``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import numpy as np

from core.cli import parse_config, run_main
from core.errors import InputError
from core.io import atomic_writer, markdown_table, read_records, write_json
from core.metrics import label_metrics
from core.records import DEFAULT_RELEVANCE_THRESHOLD, Judgment, label_from_grade
from data.beir import graded_qrels, read_qrels


@dataclass
class AgreementConfig:
    judgments: str = field(default="", metadata={"help": "The judge's judgments JSONL."})
    qrels: str | None = field(
        default=None, metadata={"help": "Human qrels (BEIR .tsv or TREC) as the reference."}
    )
    reference: str | None = field(
        default=None, metadata={"help": "Or another judgments JSONL as the reference."}
    )
    label_threshold: int = field(
        default=DEFAULT_RELEVANCE_THRESHOLD, metadata={"help": "Relevant when grade >= this."}
    )
    out: str | None = field(
        default=None, metadata={"help": "Write OUT.md and OUT.json (default: print only)."}
    )


class QueryAgreement(TypedDict):
    pairs: int
    accuracy: float
    reference_relevant: int
    judge_relevant: int


class _Agreement(TypedDict):
    pairs: int
    skipped_errors: int
    reference_positive_rate: float
    judge_positive_rate: float
    accuracy: float
    precision: float
    recall: float
    f1: float
    kappa: float
    confusion_matrix: list[list[int]]


class JudgeAgreement(_Agreement, total=False):
    """:func:`agreement`'s result, OUT.json as written (keys in the order written)."""

    quadratic_weighted_kappa: float  # with reference grades and judge grades
    grade_confusion_matrix: list[list[int]]
    roc_auc: float  # when every pair has a P(relevant) and the reference both classes
    per_query: dict[str, QueryAgreement]  # always, after the optional measures
    judgments: str  # set by run_agreement
    reference: str | None


def agreement(
    judged: list[Judgment],
    reference: dict[tuple[str, str], int | None],
    label_threshold: int,
    reference_grades: bool,
) -> JudgeAgreement:
    """Compare judge labels with reference grades (or labels when ``reference_grades`` is false)."""
    from sklearn.metrics import cohen_kappa_score, confusion_matrix, roc_auc_score

    rows = []
    for judgment in judged:
        if judgment.error is not None:
            continue
        ref = reference.get((judgment.qid, judgment.doc_id))
        if ref is None:
            continue
        ref_label = label_from_grade(ref, label_threshold) if reference_grades else int(ref)
        rows.append((judgment, ref, ref_label))
    if not rows:
        raise InputError("no judged pair has a reference judgment")
    y_true = np.array([r[2] for r in rows])
    y_pred = np.array([r[0].label for r in rows])
    decided = label_metrics(y_true, y_pred)
    result: JudgeAgreement = {
        "pairs": len(rows),
        "skipped_errors": sum(1 for j in judged if j.error is not None),
        "reference_positive_rate": float(y_true.mean()),
        "judge_positive_rate": float(y_pred.mean()),
        "accuracy": decided.accuracy,
        "precision": decided.precision,
        "recall": decided.recall,
        "f1": decided.f1,
        "kappa": decided.kappa,
        "confusion_matrix": decided.confusion_matrix,
    }
    graded = [(r[0].grade, r[1]) for r in rows if r[0].grade is not None]
    if reference_grades and graded:
        judge_grades, ref_grades = zip(*graded, strict=True)
        result["quadratic_weighted_kappa"] = float(
            cohen_kappa_score(ref_grades, judge_grades, weights="quadratic", labels=[0, 1, 2, 3])
        )
        result["grade_confusion_matrix"] = confusion_matrix(
            ref_grades, judge_grades, labels=[0, 1, 2, 3]
        ).tolist()
    scored = [(r[0].p_relevant, r[2]) for r in rows if r[0].p_relevant is not None]
    if len(scored) == len(rows) and len(set(y_true)) > 1:
        result["roc_auc"] = float(roc_auc_score([s[1] for s in scored], [s[0] for s in scored]))
    per_query: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for judgment, _, ref_label in rows:
        per_query[judgment.qid].append((ref_label, judgment.label))
    result["per_query"] = {
        qid: {
            "pairs": len(items),
            "accuracy": float(np.mean([a == b for a, b in items])),
            "reference_relevant": int(sum(a for a, _ in items)),
            "judge_relevant": int(sum(b for _, b in items)),
        }
        for qid, items in sorted(per_query.items())
    }
    return result


def to_markdown(result: JudgeAgreement, title: str) -> str:
    lines = [
        f"# Agreement: {title}",
        "",
        markdown_table(
            [
                "pairs",
                "accuracy",
                "precision",
                "recall",
                "F1",
                "Cohen's κ",
                "weighted κ (grades)",
                "ROC-AUC",
            ],
            [
                [
                    result["pairs"],
                    *(
                        f"{result[m]:.3f}"
                        for m in ("accuracy", "precision", "recall", "f1", "kappa")
                    ),
                    _optional(result, "quadratic_weighted_kappa"),
                    _optional(result, "roc_auc"),
                ]
            ],
        ),
        f"Reference positive rate {result['reference_positive_rate']:.3f}, judge positive rate "
        f"{result['judge_positive_rate']:.3f}; {result['skipped_errors']} error record(s) skipped.",
        "",
        "Confusion matrix (rows: reference not relevant / relevant; columns: judge):",
        "",
        markdown_table(
            ["", "judge 0", "judge 1"],
            [
                [name, *row]
                for name, row in zip(
                    ("reference 0", "reference 1"), result["confusion_matrix"], strict=True
                )
            ],
        ),
        markdown_table(
            ["query", "pairs", "accuracy", "reference relevant", "judge relevant"],
            [
                [
                    qid,
                    item["pairs"],
                    f"{item['accuracy']:.2f}",
                    item["reference_relevant"],
                    item["judge_relevant"],
                ]
                for qid, item in result["per_query"].items()
            ],
        ),
    ]
    return "\n".join(lines)


def _optional(result: JudgeAgreement, key: str) -> str:
    value = result.get(key)
    return "–" if value is None else f"{value:.3f}"


def run_agreement(config: AgreementConfig) -> JudgeAgreement:
    if not config.judgments:
        raise InputError("judgments: give the judge's judgments JSONL")
    judged = list(read_records(config.judgments, Judgment))
    if config.qrels:
        qrels = graded_qrels(read_qrels(config.qrels), config.qrels)
        reference = {(q, d): g for q, docs in qrels.items() for d, g in docs.items()}
        graded = True
    elif config.reference:
        ref_judgments = [j for j in read_records(config.reference, Judgment) if j.error is None]
        graded = all(j.grade is not None for j in ref_judgments)
        reference = {(j.qid, j.doc_id): (j.grade if graded else j.label) for j in ref_judgments}
    else:
        raise InputError("give --qrels QRELS or --reference JUDGMENTS")
    result = agreement(judged, reference, config.label_threshold, graded)
    result["judgments"] = config.judgments
    result["reference"] = config.qrels or config.reference
    if config.out:
        write_json(Path(f"{config.out}.json"), result)
        with atomic_writer(Path(f"{config.out}.md")) as handle:
            handle.write(to_markdown(result, f"{config.judgments} vs {result['reference']}"))
    return result


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([AgreementConfig], args)
    result = run_agreement(config)
    text = to_markdown(result, f"{config.judgments} vs {result['reference']}")
    print("\n".join(text.splitlines()[:14]))


if __name__ == "__main__":
    run_main(main)
