"""Small evaluation folders for the report tests: eval.search on ADI with a noisy ``judgments:``
labeler (two runs, top 5), with and without human judgments of 12 queries, a main-job run
folder around the first (with a 5-fold cross-validation of synthetic predictions), and a small
labeler leaderboard (relevance-grader zoo)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

from core.io import write_jsonl
from core.job_stages import JobConfig
from core.records import Judgment, label_from_grade
from data.beir import Collection, ranked, write_trec_qrels, write_trec_run
from data.build import DatasetManifest
from eval.search.command import main as search_main
from measure.classification.summaries import (
    METRICS,
    FoldResult,
    JobSummary,
    MeanSd,
    ModelSummary,
    StudySummary,
)
from measure.zoo.record import Leaderboard

K = 5
JUDGED = 12  # queries people judged (at least judgments.coverage.MIN_JUDGED_QUERIES)


def _runs(collection: Collection, rng: random.Random) -> dict[str, dict]:
    """'good' puts the relevant documents first; 'shuffled' ranks the same documents at random."""
    good, shuffled = {}, {}
    doc_ids = sorted(collection.corpus)
    for qid in sorted(collection.qrels):
        relevant = set(collection.qrels[qid])
        docs = sorted(relevant | set(rng.sample(doc_ids, 12)))
        good[qid] = {d: (10.0 if d in relevant else 0.0) + rng.random() for d in docs}
        shuffled[qid] = {d: rng.random() for d in docs}
    return {"good": good, "shuffled": shuffled}


def _labeler(collection: Collection, runs: dict, rng: random.Random) -> list[Judgment]:
    """A labeler that is right four times in five, with a P(relevant) and a 0-3 grade."""
    records = []
    pairs = {
        (q, d) for run in runs.values() for q, docs in run.items() for d, _ in ranked(docs)[:K]
    }
    for qid, doc_id in sorted(pairs):
        truth = doc_id in collection.qrels[qid]
        verdict = truth if rng.random() < 0.8 else not truth
        grade = rng.choice([2, 3]) if verdict else rng.choice([0, 1])
        p = min(0.99, max(0.01, (0.75 if verdict else 0.25) + rng.uniform(-0.2, 0.2)))
        records.append(
            Judgment(
                qid=qid,
                query=collection.queries[qid],
                doc_id=doc_id,
                text=collection.corpus[doc_id].text,
                grade=grade,
                label=label_from_grade(grade),
                p_relevant=round(p, 3),
                rationale=f"synthetic verdict {grade}",
            )
        )
    return records


def _human(collection: Collection, runs: dict, rng: random.Random) -> dict[str, dict[str, int]]:
    """People's 0-3 grades of every top-5 hit of 12 queries (and of their relevant documents)."""
    qids = sorted(rng.sample(sorted(collection.qrels), JUDGED))
    qrels: dict[str, dict[str, int]] = {}
    for qid in qids:
        docs = {d for run in runs.values() for d, _ in ranked(run[qid])[:K]}
        docs |= set(collection.qrels[qid])
        qrels[qid] = {
            d: rng.choice([2, 3]) if d in collection.qrels[qid] else rng.choice([0, 0, 1])
            for d in sorted(docs)
        }
    return qrels


def make_search_folders(adi: Path, root: Path) -> dict[str, Path]:
    """{'human': eval.search output with --human (report written by default),
    'no_human': the same runs without human judgments and with --report false, 'human_qrels'}."""
    rng = random.Random(0)
    collection = Collection.load(adi)
    runs = _runs(collection, rng)
    paths = {}
    for name, run in runs.items():
        paths[name] = root / f"{name}.trec"
        write_trec_run(paths[name], run)
    judgments = root / "labeler.jsonl"
    write_jsonl(judgments, _labeler(collection, runs, rng))
    human = root / "human.qrels"
    write_trec_qrels(human, _human(collection, runs, rng))
    common = [
        "--run",
        str(paths["good"]),
        "--compare",
        str(paths["shuffled"]),
        "--corpus",
        str(adi),
        "--labeler",
        f"judgments:{judgments}",
        "--k",
        str(K),
    ]
    search_main([*common, "--out", str(root / "human"), "--human", str(human)])
    search_main([*common, "--out", str(root / "no-human"), "--report", "false"])
    return {"human": root / "human", "no_human": root / "no-human", "human_qrels": human}


FOLDS = 5
# How well each model of the fixture's cross-validation separates relevant from not relevant.
# The grader beats BM25 but not cosine (as in the main job), so the page has a NO to show.
SEPARATION = {"bm25": 0.05, "cosine": 0.2, "judge": 0.0, "grader": 0.2}


def _cross_validation(collection: Collection, run: Path, rng: random.Random) -> Path:
    """The main job's cross-validation over every ADI query, as eval.study leaves it: the folds
    (dataset/manifest.json), each model's test predictions per fold
    (cv/fold-K/MODEL/predictions.jsonl; the judge scores a sample) and cv/study.json, pooled by
    eval.crossval; returns the human qrels the folds are judged against."""
    from measure.classification.crossval import OutOfFold, PooledMetrics, cross_validate

    qids = sorted(collection.qrels)
    rng.shuffle(qids)
    tests = [sorted(qids[i::FOLDS]) for i in range(FOLDS)]
    doc_ids = sorted(collection.corpus)
    grades = {
        q: {d: rng.choice([2, 3]) for d in collection.qrels[q]}
        | {d: rng.choice([0, 0, 1]) for d in rng.sample(doc_ids, 8) if d not in collection.qrels[q]}
        for q in qids
    }
    qrels = run / "qrels.txt"
    write_trec_qrels(qrels, grades)
    folds, outputs = [], []
    for k, test in enumerate(tests):
        validation = tests[(k + 1) % FOLDS]
        pairs = sum(len(grades[q]) for q in test)
        folds.append(
            {
                "counts": {
                    "train": {"queries": len(qids) - len(test) - len(validation)},
                    "validation": {"queries": len(validation)},
                    "test": {"pairs": pairs, "queries": len(test)},
                },
                "queries": {"validation": validation, "test": test},
            }
        )
        outputs.append({})
        for model, separation in SEPARATION.items():
            rows = []
            for q in test:
                for d, g in sorted(grades[q].items()):
                    label = int(g >= 2)
                    scored = model != "judge" or rng.random() < 0.3
                    p = (
                        min(
                            0.99,
                            max(
                                0.01,
                                0.5
                                + (separation if label else -separation)
                                + rng.uniform(-0.5, 0.5),
                            ),
                        )
                        if scored
                        else None
                    )
                    rows.append(
                        {
                            "qid": q,
                            "doc_id": d,
                            "probability": p,
                            "predicted": None if p is None else int(p >= 0.5),
                            "teacher_label": label,
                            "human_label": label,
                        }
                    )
            folder = run / "cv" / f"fold-{k}" / model
            write_jsonl(folder / "predictions.jsonl", rows)
            outputs[k][model] = folder
    cross = cross_validate(outputs, ["grader"], ["bm25", "cosine"], "human")
    per_fold = []
    for k, models in enumerate(outputs):
        for model, folder in models.items():
            metrics = PooledMetrics.of(OutOfFold.read([folder], "human")).to_dict()
            metrics.pop("queries")
            per_fold.append(FoldResult(fold=k, model=model, **metrics))
    DatasetManifest.of({"folds": folds}).write(run / "dataset" / DatasetManifest.FILE)
    StudySummary(
        collection=str(collection.root),
        folds=FOLDS,
        queries_per_fold=[len(test) for test in tests],
        max_pairs_per_query=None,
        models={m: _model_summary([r for r in per_fold if r.model == m]) for m in SEPARATION},
        per_fold=per_fold,
        cross_validation=cross,
        learning_curve=[],
    ).write(run / "cv" / StudySummary.FILE)
    return qrels


def _model_summary(rows: list[FoldResult]) -> ModelSummary:
    """A model's means over the folds, as eval.study's summary has them (sd left out)."""

    def mean(name: str) -> MeanSd:
        values = [v for v in (row.metric(name) for row in rows) if v is not None]
        return MeanSd(mean=sum(values) / len(values) if values else None, sd=None)

    return ModelSummary(**{name: mean(name) for name in METRICS}, seconds=0.0)


def make_main_job_folder(search: Path, adi: Path, root: Path) -> Path:
    """A main-job run folder around an eval.search output: the cross-validation (cv/, dataset/),
    summary.json as the job writes it (with a table the report does not know and the means
    under every human judgment), config.json and an eval.ranking_agreement agreement.json."""
    run = root / "main-run"
    shutil.copytree(search, run / "search")
    (run / "search" / "report.html").unlink(missing_ok=True)
    mean = json.loads((search / "metrics.json").read_text())["mean"]
    qrels = _cross_validation(Collection.load(adi), run, random.Random(1))
    JobConfig.of({"run_dir": str(run), "k": K, "qrels": str(qrels)}).write(run / JobConfig.FILE)
    scores = {
        "qrels:HUMAN": {r: 0.4 + i / 10 for i, r in enumerate(mean)},
        "judgments:LABELER": {r: 0.9 - i / 10 for i, r in enumerate(mean)},
    }
    from measure.metrics.ranking_agreement import LabelerAgreement, LeftOut, RankingAgreement

    ranking = sorted(scores["judgments:LABELER"], key=lambda r: -scores["judgments:LABELER"][r])
    agreement = RankingAgreement(
        metric=f"ndcg@{K}",
        reference="qrels:HUMAN",
        scores=scores,
        agreement={
            "judgments:LABELER": LabelerAgreement(
                kendall_tau=-1.0, kendall_p=0.02, spearman_rho=-1.0, ranking=ranking
            )
        },
        left_out=LeftOut(
            pairs=3,
            of_pairs=40,
            reasons={"judgments:LABELER: an unusable reply": 3},
            queries=[],
            of_queries=8,
        ),
        reference_ranking=sorted(scores["qrels:HUMAN"], key=lambda r: -scores["qrels:HUMAN"][r]),
    )
    agreement.write(run / "agreement" / RankingAgreement.FILE)
    study = StudySummary.read(run / "cv" / StudySummary.FILE)
    JobSummary(
        run_dir=str(run),
        seconds=12.5,
        # A re-run: the retrieval was done earlier (40 s then) and skipped.
        stage_seconds={"retrieval runs": 40.0, "metric pipeline": 3.0},
        done_earlier=["retrieval runs"],
        folds=study.folds,
        queries_per_fold=study.queries_per_fold,
        names={"bm25": "BM25 score", "cosine": "MiniLM cosine", "grader": "grader (ours)"},
        cross_validation=study.cross_validation,
        per_fold=study.per_fold,
        export_fold=0,
        search=mean,
        human_all_queries={r: {"ndcg@5": 0.5 + i / 10} for i, r in enumerate(mean)},
        export=str(run / "export"),
        # A table this release does not know: the page shows it as it is.
        calibration_check=[{"fold": i, "ece": 0.05 + i / 100} for i in range(FOLDS)],
    ).write(run / JobSummary.FILE)
    return run


def make_leaderboard() -> Leaderboard:
    """A small labeler leaderboard (relevance-grader zoo) with every case a cell can show: a τ
    with its interval, one without (no spread), an undefined one (a constant labeler ties every
    system), a PPI++ row missing for one size, a labeler that lifts its own system, people alone."""
    from measure.zoo.record import (
        Agreement,
        DrawnTausRecord,
        Estimate,
        RankErrorRecord,
        ReadingResult,
        SelfPreference,
        SystemRecord,
    )

    # People rank dense, grader-rerank, bm25, random; the grader puts its own rerank first.
    systems = {"bm25": 0.42, "dense": 0.55, "grader-rerank": 0.48, "random": 0.05}

    def means(values: dict[str, float]) -> dict[str, dict[str, float]]:
        return {name: {"ndcg@10": value} for name, value in values.items()}

    def agreement(tau: Estimate) -> dict[str, Agreement]:
        return {"ndcg@10": Agreement(kendall_tau=tau, tau_ap=tau, spearman_rho=tau)}

    def drawn(judged: int, mean: float | None, undefined: int = 0) -> DrawnTausRecord:
        spread = (None, None) if mean is None else (mean - 0.2, min(1.0, mean + 0.1))
        return DrawnTausRecord(
            judged=judged, draws=200, mean=mean, sd=None, low=spread[0], high=spread[1],
            undefined=undefined,
        )  # fmt: skip

    grader_scores = ReadingResult(
        labeler="grader",
        spec="grader:runs/main/export",
        reading="scores",
        means=means({"bm25": 0.5, "dense": 0.6, "grader-rerank": 0.8, "random": 0.1}),
        agreement=agreement(Estimate(value=0.667, low=0.333, high=1.0)),
        top1=True,
        top3=1.0,
        largest_error=RankErrorRecord(
            places=1, system="grader-rerank", human_rank=2, labeler_rank=1
        ),
        self_preference=SelfPreference(
            own_systems=["grader-rerank"],
            lift=Estimate(value=1.0, low=0.5, high=2.0),
            tau_without_own=1.0,
        ),
        ppi=[drawn(10, 0.81), drawn(20, 0.9)],
    )
    grader_labels = grader_scores.model_copy(
        update={
            "reading": "labels",
            "means": means({"bm25": 0.45, "dense": 0.7, "grader-rerank": 0.6, "random": 0.2}),
            "agreement": agreement(Estimate(value=1.0)),  # the same in every resample
            "largest_error": RankErrorRecord(
                places=0, system="dense", human_rank=1, labeler_rank=1
            ),
            "self_preference": SelfPreference(
                own_systems=["grader-rerank"],
                lift=Estimate(value=0.0, low=-0.5, high=0.5),
                tau_without_own=1.0,
            ),
            "share_relevant": 0.31,
            "threshold": 0.42,
            "ppi": [drawn(10, 0.85, undefined=3)],  # no row for 20 judged queries
        }
    )
    constant = ReadingResult(
        labeler="constant",
        spec="constant:",
        reading="labels",
        means=means(dict.fromkeys(systems, 1.0)),
        agreement=agreement(Estimate(value=None)),
        top1=None,
        top3=None,
        largest_error=None,
        share_relevant=1.0,
        ppi=[drawn(10, None), drawn(20, 0.7)],
    )
    return Leaderboard(
        collection="data/collections/trec-dl-2019-passage",
        qrels="data/collections/trec-dl-2019-passage/qrels.tsv",
        queries=43,
        k=10,
        pooled_pairs=1234,
        human_share_relevant=0.27,
        resamples=1000,
        systems=[
            SystemRecord(
                name=name,
                kind="rerank" if name == "grader-rerank" else name,
                human={"ndcg@10": value, "p@10": value / 2, "map@10": value / 3},
                judged_at_k=0.9,
                seconds=1.0,
            )
            for name, value in systems.items()
        ],
        skipped={"dense-hnsw": "hnswlib is not installed"},
        people_only=[drawn(10, 0.74), drawn(20, 0.86)],
        readings=[constant, grader_labels, grader_scores],
    )
