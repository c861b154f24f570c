"""How far two or more assessors of a judging session agree, and the hits to adjudicate.

    relevance-grader annotate agreement --judgments runs/judging --out runs/judging/agreement

For each pair of assessors, on the hits both judged: the share with the same grade and the same
relevance (grade >= 2), Cohen's κ on relevance and the quadratic-weighted κ on the 0-3 grades
(scikit-learn, through :func:`data.judge_agreement.agreement`). Then every hit they graded
differently, for adjudication: ``relevance-grader annotate --out runs/judging --adjudicate true
--assessor NAME`` serves exactly those hits, and the adjudicator's grade goes into the qrels.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from core.cli import parse_config, run_main
from core.errors import InputError
from core.io import atomic_writer, markdown_table, write_json
from core.records import DEFAULT_RELEVANCE_THRESHOLD, Judgment
from data.judge_agreement import agreement
from judgments.store import assessor_of, read_judgments


@dataclass
class AgreementConfig:
    judgments: str = field(
        default="", metadata={"help": "A judging session folder (or its judgments.jsonl)."}
    )
    assessors: list[str] = field(
        default_factory=list, metadata={"help": "Assessors to compare (default: every one)."}
    )
    out: str | None = field(
        default=None, metadata={"help": "Write OUT.md and OUT.json (default: print only)."}
    )


def by_assessor(records: Sequence[Judgment]) -> dict[str, dict[tuple[str, str], Judgment]]:
    out: dict[str, dict[tuple[str, str], Judgment]] = {}
    for record in records:
        if not (record.model_extra or {}).get("adjudication"):
            out.setdefault(assessor_of(record), {})[(record.qid, record.doc_id)] = record
    return out


class PairAgreement(TypedDict):
    """Two assessors on the hits both judged."""

    hits: int
    same_grade: float
    same_relevance: float
    kappa: float
    weighted_kappa: float | None
    grade_confusion_matrix: list[list[int]] | None


class AssessorAgreement(TypedDict):
    """OUT.json of the assessors' agreement."""

    judgments: str
    assessors: dict[str, int]  # assessor -> hits judged
    pairs: dict[str, PairAgreement | None]  # "a vs b" -> None when they share no hit
    disagreements: list[dict[str, Any]]


def pair_agreement(first: dict, second: dict) -> PairAgreement | None:
    """κ and shares on the hits both judged (None when they share no hit)."""
    common = sorted(set(first) & set(second))
    if not common:
        return None
    reference = {hit: first[hit].grade for hit in common}
    result = agreement([second[h] for h in common], reference, DEFAULT_RELEVANCE_THRESHOLD, True)
    weighted = result.get("quadratic_weighted_kappa")
    return {
        "hits": len(common),
        "same_grade": sum(first[h].grade == second[h].grade for h in common) / len(common),
        "same_relevance": result["accuracy"],
        "kappa": result["kappa"],
        "weighted_kappa": None if weighted is None or math.isnan(weighted) else weighted,
        "grade_confusion_matrix": result.get("grade_confusion_matrix"),
    }


def disagreements(judged: dict[str, dict[tuple[str, str], Judgment]]) -> list[dict[str, Any]]:
    """Every hit two or more assessors graded differently, largest grade gap first."""
    hits = sorted({hit for items in judged.values() for hit in items})
    rows = []
    for hit in hits:
        grades = {name: items[hit].grade for name, items in judged.items() if hit in items}
        if len(set(grades.values())) > 1:
            record = next(items[hit] for items in judged.values() if hit in items)
            gap = max(grades.values()) - min(grades.values())
            rows.append(
                {"qid": hit[0], "doc_id": hit[1], "query": record.query, "title": record.title}
                | {"grades": grades, "gap": gap}
            )
    return sorted(rows, key=lambda row: -row["gap"])


def assessor_agreement(config: AgreementConfig) -> AssessorAgreement:
    judged = by_assessor(read_judgments(config.judgments))
    names = config.assessors or sorted(judged)
    unknown = sorted(set(names) - set(judged))
    if unknown:
        raise InputError(f"assessors: {unknown[0]!r} judged nothing in {config.judgments}")
    if len(names) < 2:
        raise InputError(f"judgments: {config.judgments} holds {len(names)} assessor(s); need 2")
    pairs = {
        f"{a} vs {b}": pair_agreement(judged[a], judged[b])
        for a, b in itertools.combinations(names, 2)
    }
    return {
        "judgments": config.judgments,
        "assessors": {name: len(judged[name]) for name in names},
        "pairs": pairs,
        "disagreements": disagreements({name: judged[name] for name in names}),
    }


def to_markdown(result: AssessorAgreement) -> str:
    def number(value: float | None) -> str:
        return "–" if value is None else f"{value:.3f}"

    measures = ("hits", "same_grade", "same_relevance", "kappa", "weighted_kappa")
    rows = [
        [name, *(("0" if k == "hits" else "–") for k in measures)]
        if item is None
        else [name, item["hits"], *(number(item[k]) for k in measures[1:])]
        for name, item in result["pairs"].items()
    ]
    header = ["assessors", "hits both judged", "same grade", "same relevance", "Cohen's κ"]
    names = list(result["assessors"])
    listed = [
        [
            r["qid"],
            r["query"],
            r["doc_id"],
            r["title"] or "",
            *(r["grades"].get(n, "") for n in names),
        ]
        for r in result["disagreements"]
    ]
    return "\n".join(
        [
            f"# Agreement between assessors ({result['judgments']})",
            "",
            markdown_table([*header, "weighted κ (grades)"], rows),
            f"Relevant = grade >= {DEFAULT_RELEVANCE_THRESHOLD}; weighted κ: quadratic weights.",
            "",
            f"## Disagreements to adjudicate ({len(listed)})",
            "",
            markdown_table(["query id", "query", "document", "title", *names], listed),
        ]
    )


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([AgreementConfig], args)
    if not config.judgments:
        raise InputError("judgments: give a judging session folder (or its judgments.jsonl)")
    result = assessor_agreement(config)
    text = to_markdown(result)
    if config.out:
        write_json(f"{config.out}.json", result)
        with atomic_writer(f"{config.out}.md") as handle:
            handle.write(text)
    print(text, end="")


if __name__ == "__main__":
    run_main(main)
