"""The report's data in plain Python (no browser, no plotting): :func:`report_data` makes a
:class:`~eval.report.model.Report`, whose ``to_dict()`` the page embeds, from an evaluation folder
as :func:`~eval.report.inputs.read_inputs` read it; :func:`build_report` reads the folder and
makes it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from eval.report.held_out import held_out, learned_queries_note, out_of_fold_agreement
from eval.report.inputs import (
    HumanLabels,
    Inputs,
    Recorded,
    ZooInputs,
    read_human_pairs,
    read_inputs,
)
from eval.report.leaderboard import leaderboard_section, zoo_report
from eval.report.model import (
    Cell,
    Difference,
    Document,
    Headline,
    HitRow,
    Interval,
    QueryRow,
    Report,
)
from eval.report.sections import label_agreement, provenance, ranking
from judgments.coverage import (
    MIN_JUDGED_QUERIES,
    NOT_STUDIED,
    coverage_legend,
    coverage_marks,
    coverage_note,
)
from judgments.samples import human_qrels
from measure.metrics.ppi_record import PpiRecord
from measure.metrics.results import HitResult, RunResults
from measure.metrics.significance import LabelerTests, labeler_tests

# The order a reader expects; metrics the file has beyond these follow in its own order.
METRIC_ORDER = ("ndcg@{k}", "map", "mrr", "precision@{k}", "recall@{k}", "hit@{k}")
PAIR_METRIC = "relevant share"  # eval.search --human_pairs: PPI++ over sampled hits


@dataclass
class ReportOptions:
    corpus: str | None = None  # where the documents are (default: as eval.search read them)
    queries: str | None = None
    human: str | None = None  # human qrels shown beside the labels (default: eval.search's)
    agreement: str | None = None  # a relevance-grader ranking-agreement agreement.json
    max_queries: int = 1000  # queries whose hits (and documents) the page embeds
    text_chars: int = 600  # characters of each document shown


def metric_names(mean: dict[str, dict[str, float]], k: int) -> list[str]:
    present = list(next(iter(mean.values())))
    ordered = [name.format(k=k) for name in METRIC_ORDER if name.format(k=k) in present]
    return ordered + [name for name in present if name not in ordered]


def _labeler_difference(
    per_query: dict[str, RunResults] | None,
    mean: dict[str, dict[str, float]],
    a: str,
    b: str,
    metric: str,
) -> float:
    """Mean over the queries both runs have of ``a`` − ``b`` (the run means' difference when the
    per-query values are missing)."""
    if per_query and a in per_query and b in per_query:
        both = [(r, per_query[b].get(q)) for q, r in per_query[a].items()]
        values = [(r.metric(metric), s.metric(metric)) for r, s in both if s is not None]
        pairs = [x - y for x, y in values if x is not None and y is not None]
        if pairs:
            return sum(pairs) / len(pairs)
    return mean[a][metric] - mean[b][metric]


def evaluation_alpha(inputs: Inputs) -> float:
    """The level eval.search tested at: its --alpha (the PPI++ record's, or its settings'), 0.05
    where neither is recorded. One level for every mark of the page, as in eval.search."""
    ppi = inputs.metrics.ppi
    if ppi and ppi.multiplicity:
        return ppi.multiplicity.alpha
    if inputs.search_config is not None:
        return inputs.search_config.alpha
    return 1 - ppi.confidence if ppi else 0.05


def _labeler_tests(inputs: Inputs, runs: list[str], primary: str) -> LabelerTests | None:
    """ranx's paired tests on the labeler's labels under the one rule (the primary metric,
    Holm over every pair of runs); None without a comparison."""
    report = inputs.metrics
    if report.comparison is None or len(runs) < 2 or primary not in report.mean[runs[0]]:
        return None
    means = {run: report.mean[run][primary] for run in runs}
    return labeler_tests(
        report.p_value, runs, means, primary, evaluation_alpha(inputs), report.stat_test or ""
    )


def _cells(inputs: Inputs, runs: list[str], metrics: list[str], tests: LabelerTests | None) -> dict:
    report = inputs.metrics
    ppi = report.ppi
    truth = (inputs.summary.human_all_queries if inputs.summary else None) or {}
    cells: dict[str, dict[str, Cell]] = {}
    for run in runs:
        cells[run] = {}
        for metric in metrics:
            entry = (
                ppi.runs.get(run, {}).get(metric) or ppi.pairs.get(run, {}).get(metric)
                if ppi
                else None
            )
            mean = report.mean[run].get(metric)
            # The run's mean as metrics.json's "mean" has it (the PPI record's is the same mean
            # summed in another order); the share of relevant hits is only in the PPI record.
            cell = Cell(labeler_mean=float(mean if mean is not None else entry.labeler_mean))
            if entry:
                cell.ppi = Interval.from_record(entry.ppi)
                cell.human_only = Interval.from_record(entry.human_only)
                cell.lam = entry.ppi.lam
                worth = entry.effective_human_queries  # capped here too for an earlier file
                cell.worth = None if worth is None else min(worth, float(entry.queries))
            if metric in truth.get(run, {}):
                cell.human_all = float(truth[run][metric])
            for other in runs:
                p = report.p_value(metric, run, other)
                if other == run or p is None:
                    continue
                cell.p_values[other] = p
            # A mark sits only on the labeler's mean of the primary metric (Holm over the pairs
            # of runs), never on PPI++'s: a test on the labels says nothing of the estimate.
            if tests is not None and metric == tests.primary and cell.ppi is None:
                cell.beats = tests.beaten(run)
                cell.p_holm = {
                    other: tests.adjusted[frozenset((run, other))]
                    for other in runs
                    if frozenset((run, other)) in tests.adjusted
                }
            cells[run][metric] = cell
    return cells


def _differences(
    inputs: Inputs, runs: list[str], metrics: list[str], tests: LabelerTests | None
) -> list[Difference]:
    """Each compared run minus the first, per metric. Only the primary metric's differences can
    be significant: with human judgments by Holm over the PPI++ differences (as eval.search
    adjusted), without by Holm over the labeler's paired tests (``tests``); every other metric is
    marginal."""
    report = inputs.metrics
    first, *others = runs
    ppi = report.ppi
    found = ppi.differences if ppi else {}
    alpha = evaluation_alpha(inputs)
    out = []
    for other in others:
        entries = found.get(f"{other} - {first}", {})
        for metric in metrics:
            if metric not in report.mean[first]:
                continue
            entry = entries.get(metric)
            labeler_holm = (
                tests.adjusted.get(frozenset((other, first)))
                if tests is not None and metric == tests.primary and entry is None
                else None
            )
            out.append(
                Difference(
                    compared=other,
                    baseline=first,
                    metric=metric,
                    labeler=entry.labeler_mean
                    if entry
                    else _labeler_difference(inputs.per_query, report.mean, other, first, metric),
                    ppi=Interval.from_record(entry.ppi) if entry else None,
                    human_only=Interval.from_record(entry.human_only) if entry else None,
                    p_value=report.p_value(metric, other, first),
                    ppi_p=entry.p_value if entry else None,
                    p_holm=entry.p_holm if entry else labeler_holm,
                )
            )
            difference = out[-1]
            difference.significant = difference.p_holm is not None and difference.p_holm < alpha
    return out


def withhold_small_samples(ppi: PpiRecord | None, notes: list[str]) -> PpiRecord | None:
    """The PPI++ record without the estimates from fewer judged queries (hits) than an interval
    needs (judgments.coverage.MIN_JUDGED_QUERIES; a metrics.json written before the minimum), each
    left out with a note; None when nothing is left."""
    if ppi is None:
        return None
    kept = ppi.model_copy()
    if ppi.runs and ppi.judged_queries < MIN_JUDGED_QUERIES:
        notes.append(
            f"The PPI++ estimates of this evaluation come from {ppi.judged_queries} judged "
            f"queries, fewer than the {MIN_JUDGED_QUERIES} an interval needs (judgments.coverage): "
            "they are not shown; re-run relevance-grader search --human with more judged queries."
        )
        kept.runs, kept.differences, kept.judged_queries = {}, {}, 0
        kept.measured_coverage, kept.multiplicity = {}, None
    small = [
        run
        for run, entries in ppi.pairs.items()
        if any(e.ppi.n < MIN_JUDGED_QUERIES for e in entries.values())
    ]
    if small:
        notes.append(
            f"The relevant share of {', '.join(small)} comes from fewer than "
            f"{MIN_JUDGED_QUERIES} judged hits: not shown."
        )
        kept.pairs = {run: e for run, e in ppi.pairs.items() if run not in small}
        kept.judged_pairs = kept.judged_pairs if kept.pairs else 0
    return kept if kept.runs or kept.pairs else None


def _notice(ppi: PpiRecord | None, labeler: str, withheld: bool = False) -> str:
    if not ppi and withheld:
        return (
            f"Too few human judgments for an interval (the note above says how many): these are "
            f"the labeler's ({labeler}) means over all queries, biased by whatever the labeler "
            "gets wrong, with no interval."
        )
    if not ppi:
        return (
            f"No human judgments: these are the labeler's ({labeler}) means over all queries. "
            "They are biased by whatever the labeler gets wrong, and they carry no interval: "
            "nothing here measures how far they are from what people would say. Give "
            "relevance-grader search --human with the judgments of a random sample of queries "
            "(relevance-grader ppi draws them) for PPI++ estimates with confidence intervals."
        )
    confidence = f"{ppi.confidence:.0%}"
    judged = ppi.judged_queries
    pairs = ppi.judged_pairs
    sample = " and ".join(
        part
        for part in (judged and f"{judged} human-judged queries", pairs and f"{pairs} judged hits")
        if part
    )
    only_share = (
        ""
        if judged
        else (
            " Only the share of relevant hits has an interval: the other metrics are the labeler's "
            "means, biased, with no interval (relevance-grader search --human gives them one)."
        )
    )
    return (
        f"Estimates with {confidence} intervals from {sample} ({ppi.estimator}): the labeler "
        "labels every query and the human judgments correct its bias. Beside each estimate: the "
        f"labeler's own mean (biased) and the interval from the human judgments alone.{only_share}"
    )


def build_headline(inputs: Inputs, notes: list[str] | None = None) -> Headline:
    judged = inputs.metrics.ppi is not None
    shown = withhold_small_samples(inputs.metrics.ppi, notes if notes is not None else [])
    # The estimates shown, on a copy: the folder as read stays what it holds for other renderings.
    inputs = replace(inputs, metrics=inputs.metrics.model_copy(update={"ppi": shown}))
    report, k = inputs.metrics, inputs.metrics.k
    runs = list(report.mean)
    metrics = metric_names(report.mean, k)
    ppi = report.ppi
    if ppi and ppi.pairs:
        metrics.append(PAIR_METRIC)
    primary = f"ndcg@{k}" if f"ndcg@{k}" in metrics else metrics[0]
    tests = _labeler_tests(inputs, runs, primary)
    return Headline(
        runs=runs,
        metrics=metrics,
        primary=primary,
        cells=_cells(inputs, runs, metrics, tests),
        differences=_differences(inputs, runs, metrics, tests),
        intervals=bool(ppi),
        notice=_notice(ppi, (report.labeler or "labeler"), withheld=judged and ppi is None),
        judged_queries=ppi.judged_queries if ppi else 0,
        judged_pairs=ppi.judged_pairs if ppi else 0,
        confidence=ppi.confidence if ppi else None,
        estimator=ppi.estimator if ppi else None,
        stat_test=report.stat_test,
        alpha=evaluation_alpha(inputs),
        multiplicity=_multiplicity(ppi),
        labeler_rule=tests.legend() if tests else None,
        coverage=_coverage(ppi),
        coverage_legend=coverage_legend(),
    )


def _coverage(ppi: PpiRecord | None) -> dict[str, dict[str, Any] | None]:
    """metric -> its measured coverage, as metrics.json holds it, with its marks (the page reads
    it); the relevant share of hits was not studied."""
    if ppi is None:
        return {}
    out: dict[str, dict[str, Any] | None] = {}
    for metric, found in ppi.measured_coverage.items():
        marks = coverage_marks(found, ppi.judged_queries)
        entry = found.model_dump(exclude_unset=True) if found else {}
        out[metric] = entry | {
            "marks": marks,
            "note": coverage_note(metric, found, ppi.judged_queries),
        }
    if ppi.pairs:
        out[PAIR_METRIC] = {"marks": NOT_STUDIED, "note": "coverage not measured over judged hits"}
    return out


def _multiplicity(ppi: PpiRecord | None) -> str | None:
    """The rule that made a difference significant, in words; a metrics.json written before
    eval.search adjusted for multiplicity says that its differences are marginal."""
    if not ppi or not ppi.differences:
        return None
    rule = ppi.multiplicity.rule if ppi.multiplicity else None
    return rule or (
        "each difference's interval is a marginal interval, not adjusted for the number of metrics "
        "and runs (this metrics.json predates the adjustment: re-run relevance-grader search)"
    )


def with_options(inputs: Inputs, options: ReportOptions) -> Inputs:
    """The folder as read, with the files the options name instead of those it recorded (each
    found here once); a --human replaces both kinds of recorded judgments."""
    files = inputs.files
    if options.corpus:
        files = replace(files, corpus=inputs.recorded(options.corpus))
    if options.queries:
        files = replace(files, queries=inputs.recorded(options.queries))
    if options.human:
        files = replace(files, human=inputs.recorded(options.human), human_pairs=Recorded())
    return replace(inputs, files=files)


def read_human(inputs: Inputs, options: ReportOptions, notes: list[str]) -> HumanLabels | None:
    recorded = {"human": inputs.files.human, "human_pairs": inputs.files.human_pairs}
    for flag, file in recorded.items():
        if file.given and file.found is None:
            notes.append(
                f"The human judgments ({flag}: {file.given}) are not found here: give --human."
            )
    human, pairs = recorded["human"].found, recorded["human_pairs"].found
    if not human and not pairs:
        return None
    return HumanLabels(
        source=", ".join(str(file.found) for file in recorded.values() if file.found),
        qrels_path=human,
        qrels=human_qrels(str(human), _scale(inputs, options)) if human else {},
        pairs=read_human_pairs(pairs) if pairs else {},
    )


def _scale(inputs: Inputs, options: ReportOptions) -> str | None:
    """The scale eval.search read its --human qrels on (--human_scale); a --human given to the
    report is read by its own format (data.beir.qrels_scale)."""
    config = inputs.search_config
    return None if options.human or config is None else config.declared_human_scale


def human_per_query(
    per_query: dict[str, RunResults],
    human: HumanLabels | None,
    k: int,
    notes: list[str],
    scale: str | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """run -> qid -> metric under the human qrels, for the judged queries (eval.search's
    ``human_metrics`` on each run's top k as per_query.json lists it)."""
    from judgments.samples import human_metrics

    if human is None or not human.qrels:
        return {}
    runs = {
        run: {
            qid: {h.id: float(len(r.hits) - i) for i, h in enumerate(r.hits)}
            for qid, r in results.items()
        }
        for run, results in per_query.items()
    }
    try:
        per_metric = human_metrics(str(human.qrels_path), runs, k, scale=scale)
    except ValueError as exc:
        notes.append(f"Per-query values under the human judgments are not shown: {exc}")
        return {}
    return {
        run: {
            qid: {metric: values[qid] for metric, values in metrics.items() if qid in values}
            for qid in next(iter(metrics.values()), {})
        }
        for run, metrics in per_metric.items()
    }


def load_texts(inputs: Inputs, notes: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The corpus and the queries eval.search read (or the options' own); empty with a note when
    they cannot be found."""
    from data.beir import read_texts

    corpus = inputs.files.corpus
    if corpus.found is None:
        notes.append(
            f"Document texts are not shown: the corpus ({corpus.given or 'not recorded'}) is not "
            "found here; give --corpus."
        )
        return {}, {}
    return read_texts(corpus.found, inputs.files.queries.found)


def _hit_rows(qid: str, hits: list[HitResult], human: HumanLabels | None) -> list[HitRow]:
    rows = []
    for hit in hits:
        grade, relevant = human.of(qid, hit.id) if human else (None, None)
        rows.append(
            HitRow(
                doc_id=hit.id,
                relevant=hit.relevant,
                score=hit.score,
                grade=hit.grade,
                justification=hit.justification,
                human_grade=grade,
                human_relevant=relevant,
                disagrees=None if relevant is None else relevant != hit.relevant,
            )
        )
    return rows


def _embedded_order(rows: list[QueryRow], runs: list[str], primary: str) -> list[QueryRow]:
    """Which queries keep their hits when not all fit: judged ones first, then those where the
    first two runs differ most."""

    def gap(row: QueryRow) -> float:
        values = [row.labeler.get(run, {}).get(primary) for run in runs[:2]]
        return abs(values[1] - values[0]) if len(values) == 2 and None not in values else 0.0

    return sorted(rows, key=lambda row: (not row.judged, -gap(row), row.qid))


def build_queries(
    inputs: Inputs, options: ReportOptions, headline: Headline, notes: list[str]
) -> tuple[list[QueryRow], dict[str, Document], HumanLabels | None]:
    per_query = inputs.per_query
    if not per_query:
        notes.append("Per-query values are not shown: per_query.json is missing.")
        return [], {}, None
    k = inputs.metrics.k
    corpus, queries = load_texts(inputs, notes)
    human = read_human(inputs, options, notes)
    under_people = human_per_query(per_query, human, k, notes, _scale(inputs, options))
    judged = human.judged_queries() if human else set()
    rows: dict[str, QueryRow] = {}
    for run, results in per_query.items():
        for qid, result in results.items():
            row = rows.setdefault(qid, QueryRow(qid, queries.get(qid), qid in judged, {}))
            row.labeler[run] = dict(result.metrics)
            if qid in under_people.get(run, {}):
                row.human = row.human or {}
                row.human[run] = under_people[run][qid]
    ordered = sorted(rows.values(), key=lambda row: row.qid)
    documents: dict[str, Document] = {}
    for row in _embedded_order(ordered, headline.runs, headline.primary)[: options.max_queries]:
        row.hits = {
            run: _hit_rows(row.qid, results[row.qid].hits, human)
            for run, results in per_query.items()
            if row.qid in results
        }
        verdicts = {h.doc_id: h.disagrees for hits in row.hits.values() for h in hits}
        row.judged_hits = sum(v is not None for v in verdicts.values())
        row.disagreements = sum(bool(v) for v in verdicts.values())
        for hits in row.hits.values():
            for hit in hits:
                if hit.doc_id in corpus and hit.doc_id not in documents:
                    documents[hit.doc_id] = _document(corpus[hit.doc_id], options.text_chars)
    if len(ordered) > options.max_queries:
        notes.append(
            f"Hits are embedded for {options.max_queries} of {len(ordered)} queries (judged ones "
            "first, then those where the first two runs differ most); raise --max_queries for more."
        )
    _note_missing_documents(ordered, documents, corpus, notes)
    return ordered, documents, human


def _note_missing_documents(
    rows: list[QueryRow], documents: dict[str, Document], corpus: dict[str, Any], notes: list[str]
) -> None:
    """A corpus that holds none, or only part, of the evaluated documents is said in a note (a
    wrong --corpus would otherwise leave every hit without its text, without a word)."""
    shown = {hit.doc_id for row in rows for hits in (row.hits or {}).values() for hit in hits}
    if not corpus or not shown or len(documents) == len(shown):
        return
    where = "none" if not documents else f"{len(documents)}"
    notes.append(
        f"The corpus holds {where} of the {len(shown)} documents the runs retrieved; the others "
        "are shown without their text (is --corpus the collection that was evaluated?)."
    )


def _document(document: Any, chars: int) -> Document:
    text = document.text
    return Document(title=document.title or "", text=text[:chars], truncated=len(text) > chars)


def _title(inputs: Inputs) -> str:
    name = inputs.root.resolve().name
    return f"Main job {name}" if inputs.kind == "main job" else f"Evaluation {name}"


def _held_out_warning(inputs: Inputs) -> str | None:
    """A main job's grader that does not beat its baselines on held-out queries, in words."""
    from measure.classification.crossval import held_out_warning

    summary = inputs.summary
    if summary is None:
        return None
    return held_out_warning(summary.cross_validation, summary.names)


def build_report(folder: str | Path, options: ReportOptions | None = None) -> Report:
    """Everything the page shows, from an eval.search output folder, a main-job run folder or a
    relevance-grader zoo output folder (read once)."""
    return report_data(read_inputs(folder), options)


def report_data(inputs: Inputs | ZooInputs, options: ReportOptions | None = None) -> Report:
    """Everything the page shows, from a folder as read_inputs read it (left as it was read)."""
    options = options or ReportOptions()
    if isinstance(inputs, ZooInputs):
        return zoo_report(inputs)
    inputs = with_options(inputs, options)
    notes: list[str] = []
    headline = build_headline(inputs, notes)
    queries, documents, human = build_queries(inputs, options, headline, notes)
    held = held_out(inputs)
    warning = _held_out_warning(inputs)
    if warning:  # the first words of the page; the headline's notice points at it
        notes.insert(0, warning)
        headline.notice = (
            "Not trustworthy: the grader did not beat its baselines on held-out queries (the "
            "first note above), so its means below are not a measure of relevance. "
            f"{headline.notice}"
        )
        headline.untrusted = True
    learned = learned_queries_note(
        inputs, {row.qid for row in queries}, human.judged_queries() if human else set()
    )
    return Report(
        title=_title(inputs),
        kind=inputs.kind,
        headline=headline,
        queries=queries,
        documents=documents,
        provenance=provenance(inputs),
        # The main job's grader against people out of fold, where the folds hold its predictions:
        # on the runs' hits, the exported grader may have learned from the queries.
        agreement=out_of_fold_agreement(inputs, held) or label_agreement(inputs.per_query, human),
        ranking=ranking(inputs, headline, options.agreement),
        held_out=held,
        leaderboard=leaderboard_section(inputs.leaderboard, inputs.leaderboard_source)
        if inputs.leaderboard
        else None,
        notes=[*notes, *([learned] if learned else [])],
    )
