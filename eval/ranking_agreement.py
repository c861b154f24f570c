"""Agreement of system rankings: do grader labels rank retrieval systems as humans do?
(`data.judge_agreement` is the other agreement: a judge's labels against human labels, pair by pair.)

    python -m eval.ranking_agreement --runs runs/candidates/bm25.trec runs/candidates/dense.trec runs/dense-grader.trec \\
        --corpus data/collections/trec-dl-2019-passage \\
        --labelers grader:runs/export/grader judgments:runs/labels/smollm2.jsonl \\
        --reference qrels:data/collections/trec-dl-2019-passage/qrels.tsv --metric ndcg@10 --out runs/agreement

Each labeler (and the reference) labels every run's top-k; runs are scored with the metric on
labels pooled over the runs; Kendall's τ (and Spearman's ρ) compare each labeler's ordering of
the systems with the reference's. Also reported: the per-run scores under every labeler.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data.beir import read_named_runs
from data.cli import parse_config, run_main
from data.io import markdown_table, write_json
from eval.labelers import make_labeler
from eval.search import SearchEvalConfig, label_runs, mean_metrics, pooled_metrics


@dataclass
class SystemAgreementConfig:
    runs: list[str] = field(
        default_factory=list, metadata={"help": "TREC runs (two or more systems)."}
    )
    corpus: str = field(default="", metadata={"help": "BEIR folder with documents and queries."})
    labelers: list[str] = field(
        default_factory=list, metadata={"help": "Labelers to test (grader:, judgments:, judge:)."}
    )
    reference: str = field(
        default="", metadata={"help": "The reference labeler, usually qrels:HUMAN_QRELS."}
    )
    metric: str = field(default="ndcg@10", metadata={"help": "Metric that ranks the systems."})
    k: int = field(default=10)
    out: str = field(default="runs/agreement")
    label_cache: str | None = field(
        default=None, metadata={"help": "Label cache folder (default: OUT/labels)."}
    )


def system_scores(config: SystemAgreementConfig, spec: str, runs: dict) -> dict[str, float]:
    out = Path(config.out)
    labeler = make_labeler(spec, cache_dir=config.label_cache or out / "labels")
    search = SearchEvalConfig(corpus=config.corpus, k=config.k, labeler=spec)
    results = label_runs(search, labeler, runs)
    per_run = pooled_metrics(runs, results, config.k)
    means = {name: mean_metrics(per_metric) for name, per_metric in per_run.items()}
    if config.metric not in next(iter(means.values())):
        raise ValueError(
            f"metric: {config.metric!r} is not computed; try one of {sorted(next(iter(means.values())))}"
        )
    return {name: metrics[config.metric] for name, metrics in means.items()}


def agreement(config: SystemAgreementConfig) -> dict[str, Any]:
    from scipy.stats import kendalltau, spearmanr

    if len(config.runs) < 2:
        raise ValueError("runs: give at least two runs to rank")
    if not config.reference or not config.labelers:
        raise ValueError("give --reference and at least one --labelers entry")
    runs = read_named_runs(config.runs, "runs")
    reference = system_scores(config, config.reference, runs)
    names = sorted(runs)
    result: dict[str, Any] = {
        "metric": config.metric,
        "reference": config.reference,
        "scores": {config.reference: reference},
    }
    result["agreement"] = {}
    for spec in config.labelers:
        scores = system_scores(config, spec, runs)
        result["scores"][spec] = scores
        tau = kendalltau([reference[n] for n in names], [scores[n] for n in names])
        rho = spearmanr([reference[n] for n in names], [scores[n] for n in names])
        result["agreement"][spec] = {
            "kendall_tau": float(tau.statistic),
            "kendall_p": float(tau.pvalue),
            "spearman_rho": float(rho.statistic),
            "ranking": sorted(names, key=lambda n: -scores[n]),
        }
    result["reference_ranking"] = sorted(names, key=lambda n: -reference[n])
    write_json(Path(config.out) / "agreement.json", result)
    return result


def scores_table(result: dict[str, Any], digits: int = 4) -> str:
    """Each run's metric under each labeler, in the reference's order (Markdown)."""
    labelers = list(result["scores"])
    rows = [
        [run, *(f"{result['scores'][spec][run]:.{digits}f}" for spec in labelers)]
        for run in result["reference_ranking"]
    ]
    return markdown_table(["run", *labelers], rows)


def main(args: Sequence[str] | None = None) -> None:
    (config,) = parse_config([SystemAgreementConfig], args)
    result = agreement(config)
    print(scores_table(result), end="")
    for spec, entry in result["agreement"].items():
        print(
            f"{spec}: Kendall's τ = {entry['kendall_tau']:.3f} vs {config.reference} (Spearman's ρ = {entry['spearman_rho']:.3f})"
        )


if __name__ == "__main__":
    run_main(main)
