"""Labelers: who decides whether a retrieved hit is relevant, behind one interface.

- ``grader:PATH``: an exported (or checkpoint) grader: P(relevant) and the stored threshold (and
  a 0-3 grade, for graded NDCG gains, when the grader was trained with ``labels: graded``);
- ``judge:CONFIG.yaml``: an LLM judge through the teacher backends (data.judges), grade + rationale;
- ``qrels:PATH``: human judgments (unjudged hits count as not relevant);
- ``judgments:PATH``: a judgments JSONL (from ``relevance-grader label``);
- ``erag:READER.yaml``: eRAG (Salemi & Zamani, 2024): the RAG system's own LLM answers the query
  from each hit alone; the answer's token F1 (``erag-em:``: exact match) against the gold answers
  is the hit's label;
- ``answers:QUERIES.jsonl``: the hit contains a gold answer string (Park & Lim's word label);
- ``gold-doc:QRELS``: the hit is, or is a chunk of, a judged-relevant document (the doc label);
- ``crossfit:STUDY[#ROW]``: a cross-validated study's grader row, each query labelled by the
  fold's grader that held it out (:mod:`measure.labelers.crossfit`): a grader trained on the
  collection ranks systems on queries it never trained on.

The last three need gold answers or documents per query; they come from the queries file's
``answers`` field (and the reader YAML's ``answers:`` key for eRAG).

Untrained scores and floors (:mod:`measure.labelers.scores`): ``cosine:EMBEDDER``,
``bm25:COLLECTION`` (scores without a verdict: rerank scorers, and leaderboard rows once
calibrated), ``constant:`` and ``random:SEED``.

:class:`CachedLabeler` keeps every label in an append-only JSONL keyed by (labeler, query,
document), so labels are reused across runs and across processes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from core.errors import InputError
from core.io import KeyedCache, read_records, sha256_path
from core.parallel import broadcast_from_main
from core.records import DEFAULT_RELEVANCE_THRESHOLD, Judgment, Pair, label_from_grade
from data.beir import graded_qrels, read_qrels

UNUSABLE_REPLY = "unusable reply"  # a judgments file holds only error records for the pair
NOT_JUDGED = "not judged"  # a judgments file has no record of the pair


@dataclass
class HitLabel:
    relevant: bool
    score: float | None = None  # P(relevant) for graders
    grade: int | None = None  # 0-3 where the labeler grades
    justification: str | None = None
    input_tokens: int = 0
    threshold: float | None = None  # the decision threshold behind a probability score
    # Why the labeler has no verdict (an LLM judge's unusable reply): the hit counts as not
    # relevant, as an unjudged hit does in trec_eval, is counted, and is never cached.
    unusable: str | None = None
    # False where the labeler holds no judgment of the pair (a qrels labeler's unjudged hit,
    # read as not relevant): judged@k counts the others.
    judged: bool = True

    @property
    def has_judgment(self) -> bool:
        """The labeler judged the pair: neither unjudged nor an unusable reply."""
        return self.judged and self.unusable is None

    @property
    def relevance(self) -> int:
        """The 1-4 scale of eval_search (>= 3 relevant): a grade plus one; for a probability,
        its quarter of the way to and past the threshold (1-2 below it, 3-4 at or above)."""
        if self.grade is not None:
            return self.grade + 1
        if self.score is not None and self.threshold is not None:
            t = self.threshold
            if self.relevant:
                return 4 if self.score >= (1 + t) / 2 else 3
            return 2 if self.score >= t / 2 else 1
        return 4 if self.relevant else 1

    @property
    def gain_grade(self) -> int:
        """Graded relevance for NDCG: the grade, else 0/1 from the binary label."""
        return self.grade if self.grade is not None else int(self.relevant)


@dataclass
class Hit:
    doc_id: str
    text: str
    title: str | None = None
    source_id: str | None = None  # the document a chunk was cut from (None: a whole document)


def hit_label(judgment: Judgment) -> HitLabel:
    return HitLabel(
        relevant=bool(judgment.label),
        score=judgment.p_relevant,
        grade=judgment.grade,
        justification=judgment.rationale,
        input_tokens=judgment.usage.input_tokens if judgment.usage else 0,
    )


class Labeler:
    name = "labeler"
    # Continuous labels (eRAG's F1) are read from ``score``; the others from ``relevant``.
    continuous = False
    # False for a score without a decision (a cosine, a BM25 score): ``relevant`` means nothing
    # until a calibration turns the score into P(relevant) and a threshold.
    verdicts = True

    @property
    def id(self) -> str:
        return self.name

    def label(self, qid: str, query: str, hits: Sequence[Hit]) -> list[HitLabel]:
        """Labels for one query's hits; labelers implement this or :meth:`label_many`."""
        return self.label_many([(qid, query, hits)])[0]

    def label_many(
        self, requests: Sequence[tuple[str, str, Sequence[Hit]]]
    ) -> list[list[HitLabel]]:
        """Labels for several queries' hits; batched labelers override this."""
        if type(self).label is Labeler.label:
            raise NotImplementedError(
                f"{type(self).__name__} implements neither label nor label_many"
            )
        return [self.label(qid, query, hits) for qid, query, hits in requests]

    def query_warnings(self, query: str) -> list[str]:
        """What this labeler will not read of ``query`` as given (a cut query), for the caller."""
        return []

    def input_tokens(self, query: str, hits: Sequence[Hit]) -> int | None:
        """Model input tokens that labelling these hits costs (None: not counted)."""
        return None

    def cannot_label(self, qid: str, doc_id: str) -> str | None:
        """Why this labeler has no label for the pair, known before labelling (None: it has)."""
        return None


class GraderLabeler(Labeler):
    """A grader export or checkpoint's labels; with ``shares_states``, a query-likelihood grader
    reads the log-likelihoods its training stored in the state cache (``Grader.shares_states``)."""

    def __init__(self, path: str, grader: Any = None, shares_states: bool = False) -> None:
        self.path = path
        self._grader = grader
        self.shares_states = shares_states
        self.name = f"grader:{path}"
        self._weights_digest: str | None = None

    @property
    def grader(self) -> Any:
        """Loaded on first use: a run whose labels are all cached never loads the model."""
        if self._grader is None:
            from models.grader import Grader

            self._grader = Grader.from_pretrained(self.path)
            self._grader.shares_states = self.shares_states
        return self._grader

    @property
    def id(self) -> str:
        # Keyed on the weights' content, not the path: a re-export to the same folder must not
        # be served the previous grader's labels.
        if self._weights_digest is None:
            path = Path(self.path)
            self._weights_digest = sha256_path(path) if path.exists() else str(path)
        return f"grader:{self._weights_digest}:{self._read_out()}"

    def _read_out(self) -> str:
        """Input format, threshold and temperature: from the description while the model is not
        loaded (what loading would give), else from the grader in use."""
        from models.grader import read_grader_config, stored_temperature, stored_threshold
        from models.input_format import GraderInputFormat

        info = read_grader_config(self.path) if self._grader is None else None
        if info is not None and info.input_format is not None:
            fmt = GraderInputFormat.from_dict(info.input_format).id
            return f"{fmt}:{stored_threshold(info, self.path)}:{stored_temperature(info)}"
        grader = self.grader
        return f"{grader.input_format.id}:{grader.threshold}:{grader.temperature}"

    def query_warnings(self, query: str) -> list[str]:
        from models.input_format import format_pairs

        grader = self.grader
        if format_pairs(grader.tokenizer, grader.input_format, [query], [""]).query_truncated[0]:
            return [
                f"the query was cut to fit the grader's max_length="
                f"{grader.input_format.max_length} tokens; the grader read its beginning only"
            ]
        return []

    def input_tokens(self, query: str, hits: Sequence[Hit]) -> int | None:
        ids = self.grader.encode(
            [query] * len(hits), [hit.text for hit in hits], [hit.title for hit in hits]
        )
        return sum(map(len, ids))

    def label_many(
        self, requests: Sequence[tuple[str, str, Sequence[Hit]]]
    ) -> list[list[HitLabel]]:
        """Several queries' hits in one batched pass (each pair tokenized once)."""
        queries = [query for _, query, hits in requests for _ in hits]
        documents = [hit.text for _, _, hits in requests for hit in hits]
        titles = [hit.title for _, _, hits in requests for hit in hits]
        pairs = self.grader.encode_pairs(queries, documents, titles) if queries else None
        input_ids = pairs.input_ids if pairs else []
        grades, scores = self.grader.grades_and_scores_of_ids(
            input_ids, pairs.prefix_lengths if pairs else None
        )
        threshold = self.grader.threshold
        out, position = [], 0
        for _, _, hits in requests:
            labels = []
            for _ in hits:
                p = float(scores[position])
                grade = None if grades is None else int(grades[position])
                justification = (
                    f"grader P(relevant) = {p:.3f} {'>=' if p >= threshold else '<'} "
                    f"threshold {threshold:.3f}"
                )
                labels.append(
                    HitLabel(
                        relevant=p >= threshold,
                        score=p,
                        grade=grade,
                        input_tokens=len(input_ids[position]),
                        threshold=threshold,
                        justification=justification
                        + ("" if grade is None else f"; likeliest grade on that side: {grade}"),
                    )
                )
                position += 1
            out.append(labels)
        return out


class QrelsLabeler(Labeler):
    def __init__(self, path: str, label_threshold: int = DEFAULT_RELEVANCE_THRESHOLD) -> None:
        self.qrels = graded_qrels(read_qrels(path), path)
        self.threshold = label_threshold
        self.name = f"qrels:{path}"

    def label(self, qid: str, query: str, hits: Sequence[Hit]) -> list[HitLabel]:
        judged = self.qrels.get(qid, {})
        return [
            HitLabel(
                relevant=bool(label_from_grade(g, self.threshold)),
                grade=g,
                judged=hit.doc_id in judged,
            )
            for hit, g in ((hit, max(0, min(3, judged.get(hit.doc_id, 0)))) for hit in hits)
        ]

    def num_relevant(self, qid: str) -> int:
        return sum(1 for g in self.qrels.get(qid, {}).values() if g >= self.threshold)


class GoldDocLabeler(QrelsLabeler):
    """Relevant when the hit is, or was cut from, a document the qrels judge relevant."""

    def __init__(self, path: str, label_threshold: int = 1) -> None:
        super().__init__(path, label_threshold)
        self.name = f"gold-doc:{path}"

    def label(self, qid: str, query: str, hits: Sequence[Hit]) -> list[HitLabel]:
        judged = self.qrels.get(qid, {})
        labels = []
        for hit in hits:
            source = hit.source_id or hit.doc_id
            grade = max(0, min(3, judged.get(source, 0)))
            labels.append(
                HitLabel(
                    relevant=grade >= self.threshold,
                    justification=f"from {source}, judged {grade}" if grade else None,
                    judged=source in judged,
                )
            )
        return labels


class _GoldAnswers(Labeler):
    """A labeler that knows each query's gold answers."""

    answers: dict[str, list[str]]

    def gold(self, qid: str) -> list[str]:
        if qid not in self.answers:
            raise InputError(f"{self.name}: no gold answers for query {qid!r}")
        return self.answers[qid]


class AnswersLabeler(_GoldAnswers):
    """Relevant when the hit's text contains a gold answer (normalised, whole tokens)."""

    def __init__(self, answers: dict[str, list[str]], name: str = "answers") -> None:
        self.answers = answers
        self.name = name

    @classmethod
    def from_queries(cls, path: str) -> AnswersLabeler:
        from data.qa import read_answers

        return cls(read_answers(path), name=f"answers:{path}")

    def label(self, qid: str, query: str, hits: Sequence[Hit]) -> list[HitLabel]:
        from data.qa import contains_answer

        gold = self.gold(qid)
        return [HitLabel(relevant=contains_answer(hit.text, gold)) for hit in hits]


class ERAGLabeler(_GoldAnswers):
    """eRAG: the reader answers the query from each hit alone; the answer's score against the
    gold answers (token F1 or exact match, SQuAD-normalised) is the hit's label. Answers are
    cached and resumable (:class:`measure.labelers.reader.CachedReader`), shared by the F1 and EM labelers."""

    continuous = True

    def __init__(
        self,
        reader: Any,
        answers: dict[str, list[str]],
        metric: str = "f1",
        relevant_at: float = 0.5,
    ) -> None:
        from data.qa import ANSWER_METRICS

        if metric not in ANSWER_METRICS:
            raise InputError(
                f"erag metric: expected one of {sorted(ANSWER_METRICS)}, got {metric!r}"
            )
        self.answers = answers
        self.name = f"erag-{metric}:{reader.config.model}"
        self.reader = reader
        self.metric = metric
        self.score_answer = ANSWER_METRICS[metric]
        self.relevant_at = relevant_at

    @classmethod
    def from_yaml(cls, path: str, cache_dir: str | Path | None, metric: str) -> ERAGLabeler:
        """A reader YAML (ReaderConfig fields) with ``answers: QUERIES.jsonl`` added."""
        import yaml

        from data.qa import read_answers
        from measure.labelers.reader import CachedReader, ReaderConfig

        config = ReaderConfig.from_yaml(path, ignore=("answers",))
        settings = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        if not settings.get("answers"):
            raise InputError(f"{path}: answers: eRAG needs the queries file with gold answers")
        reader = CachedReader.in_folder(config, cache_dir or ".")
        return cls(reader, read_answers(settings["answers"]), metric)

    @property
    def id(self) -> str:
        return f"erag-{self.metric}:{self.reader.config.id}"

    def label_many(
        self, requests: Sequence[tuple[str, str, Sequence[Hit]]]
    ) -> list[list[HitLabel]]:
        items = [(query, [hit.text]) for _, query, hits in requests for hit in hits]
        outputs = iter(self.reader.answer(items, desc="eRAG answers"))
        out = []
        for qid, _, hits in requests:
            gold = self.gold(qid)
            labels = []
            for _ in hits:
                output = next(outputs)
                value = self.score_answer(output.answer, gold)
                labels.append(
                    HitLabel(
                        relevant=value >= self.relevant_at,
                        score=value,
                        input_tokens=output.input_tokens,
                        justification=f"answer {output.answer!r}: {self.metric} {value:.2f}",
                    )
                )
            out.append(labels)
        return out


class JudgmentsLabeler(Labeler):
    """A judgments file: each pair's usable judgment; a pair it lacks is an error when labelled
    (the metric pipeline is strict), and :meth:`cannot_label` says so beforehand."""

    def __init__(self, path: str) -> None:
        records = list(read_records(path, Judgment))
        self.judgments = {(j.qid, j.doc_id): j for j in records if j.error is None}
        # Pairs whose every record is an error: the judge's replies were unusable.
        self.unusable = {(j.qid, j.doc_id) for j in records if j.error is not None}
        self.unusable -= set(self.judgments)
        self.name = f"judgments:{path}"

    def cannot_label(self, qid: str, doc_id: str) -> str | None:
        if (qid, doc_id) in self.judgments:
            return None
        return UNUSABLE_REPLY if (qid, doc_id) in self.unusable else NOT_JUDGED

    def label(self, qid: str, query: str, hits: Sequence[Hit]) -> list[HitLabel]:
        labels = []
        for hit in hits:
            judgment = self.judgments.get((qid, hit.doc_id))
            if judgment is None:
                raise InputError(
                    f"{self.name}: no judgment for query {qid!r}, document {hit.doc_id!r}"
                )
            labels.append(hit_label(judgment))
        return labels


class JudgeLabeler(Labeler):
    """An LLM judge (any teacher backend) configured by a YAML file of JudgeConfig fields."""

    def __init__(self, config_path: str) -> None:
        import yaml

        from data.judges.backends import JudgeConfig
        from data.judges.prompts import load_prompt

        settings = yaml.safe_load(Path(config_path).read_text()) or {}
        fields = set(JudgeConfig.__dataclass_fields__)
        unknown = set(settings) - fields
        if unknown:
            raise InputError(f"{config_path}: unknown judge settings {sorted(unknown)}")
        self.config = JudgeConfig(**settings)
        self.prompt = load_prompt(self.config.prompt)
        self._backend: Any = None
        # Local models load on first use (a run served from the label cache loads none); a
        # remote judge is checked now, so a missing key fails before any work.
        if self.config.backend not in ("hf", "vllm"):
            self.backend  # noqa: B018 - builds it
        self.name = f"judge:{self.config.backend}:{self.config.model}:{self.prompt.id}"

    @property
    def backend(self) -> Any:
        from data.judges.backends import make_backend

        if self._backend is None:
            self._backend = make_backend(self.config, self.prompt)
        return self._backend

    def label(self, qid: str, query: str, hits: Sequence[Hit]) -> list[HitLabel]:
        pairs = [
            Pair(qid=qid, query=query, doc_id=h.doc_id, text=h.text, title=h.title) for h in hits
        ]
        results: dict[str, Judgment] = {}
        self.backend.run(pairs, lambda j: results.__setitem__(j.doc_id, j))
        labels = []
        for hit in hits:
            judgment = results[hit.doc_id]
            if judgment.error is not None:  # left out of the verdicts, counted by the caller
                labels.append(HitLabel(relevant=False, unusable=judgment.error))
                continue
            labels.append(hit_label(judgment))
        return labels


def _groups(
    requests: Sequence[tuple[str, str, Sequence[Hit]]], pairs: int
) -> list[list[tuple[str, str, Sequence[Hit]]]]:
    """Consecutive requests in groups of about ``pairs`` hits (a request is never split)."""
    groups: list[list[tuple[str, str, Sequence[Hit]]]] = []
    size = pairs
    for request in requests:
        if size >= pairs:
            groups.append([])
            size = 0
        groups[-1].append(request)
        size += len(request[2])
    return groups


class CachedLabeler(Labeler):
    """Labels cached in an append-only JSONL (one flushed line per label), reused across runs."""

    def __init__(self, inner: Labeler, cache_path: str | Path, group_pairs: int = 256) -> None:
        self.inner = inner
        self.group_pairs = group_pairs
        self.name = inner.name
        self.cache_path = Path(cache_path)
        self.cache = KeyedCache(self.cache_path, lambda line: HitLabel(**line["label"]))
        self.hits = 0

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def verdicts(self) -> bool:  # type: ignore[override]
        return self.inner.verdicts

    def cannot_label(self, qid: str, doc_id: str) -> str | None:
        return self.inner.cannot_label(qid, doc_id)

    def key(self, query: str, hit: Hit) -> str:
        payload = json.dumps([self.inner.id, query, hit.title or "", hit.text], ensure_ascii=False)
        return hashlib.sha256(payload.encode()).hexdigest()

    def label_many(
        self, requests: Sequence[tuple[str, str, Sequence[Hit]]]
    ) -> list[list[HitLabel]]:
        keys = [[self.key(query, hit) for hit in hits] for _, query, hits in requests]
        missing = [
            (qid, query, [h for h, k in zip(hits, ks, strict=True) if k not in self.cache])
            for (qid, query, hits), ks in zip(requests, keys, strict=True)
        ]
        # Under a distributed launch every process grades the main process's list, so all take
        # part in the same shared batches even if one read the cache while another wrote it.
        missing = broadcast_from_main([m for m in missing if m[2]])
        # Labelled and written a group at a time: a killed run keeps what it finished. An
        # unusable reply is not cached: the next run asks again.
        unusable: dict[str, HitLabel] = {}
        for group in _groups(missing, self.group_pairs):
            fresh = self.inner.label_many(group)
            for (_, query, hits), labels in zip(group, fresh, strict=True):
                for hit, label in zip(hits, labels, strict=True):
                    if label.unusable is not None:
                        unusable[self.key(query, hit)] = label
                    else:
                        self.cache.put(self.key(query, hit), {"label": asdict(label)})
        self.hits += sum(len(ks) for ks in keys) - sum(len(m[2]) for m in missing)
        return [[unusable.get(k) or self.cache[k] for k in ks] for ks in keys]

    def close(self) -> None:
        self.cache.close()


LABELER_KINDS = (
    "grader",
    "crossfit",
    "judge",
    "qrels",
    "judgments",
    "erag",
    "erag-em",
    "answers",
    "gold-doc",
    "cosine",
    "bm25",
    "constant",
    "random",
)
# Kinds that may lack a label for a pair, which :meth:`Labeler.cannot_label` says beforehand.
PARTIAL_KINDS = ("judgments",)


def make_labeler(
    spec: str, cache_dir: str | Path | None = None, corpus: Sequence[str] | None = None
) -> Labeler:
    """``KIND:VALUE`` for a kind in :data:`LABELER_KINDS` (see the module docstring). ``corpus``:
    the collection's texts as the dense retriever indexes them
    (``data.candidates.corpus_texts``), whose stored embeddings a cosine labeler reads."""
    kind, _, value = spec.partition(":")
    if kind in ("constant", "random"):  # nothing to cache: a rule
        from measure.labelers.scores import ConstantLabeler, RandomLabeler

        return ConstantLabeler() if kind == "constant" else RandomLabeler(_seed(value, spec))
    if not value:
        raise InputError(
            f"labeler: expected KIND:VALUE with KIND one of {', '.join(LABELER_KINDS)}, got {spec!r}"
        )
    if kind in ("erag", "erag-em"):
        # Cached per answer by its reader (resumable mid-run); nothing more to cache.
        return ERAGLabeler.from_yaml(value, cache_dir, "em" if kind == "erag-em" else "f1")
    if kind == "answers":
        return AnswersLabeler.from_queries(value)
    if kind == "gold-doc":
        return GoldDocLabeler(value)
    if kind == "grader":
        # Batch labelling with a label cache also shares the process's state cache.
        labeler: Labeler = GraderLabeler(value, shares_states=cache_dir is not None)
    elif kind == "crossfit":
        from measure.labelers.crossfit import CrossFittedLabeler

        labeler = CrossFittedLabeler(value, shares_states=cache_dir is not None)
    elif kind == "judge":
        labeler = JudgeLabeler(value)
    elif kind == "qrels":
        return QrelsLabeler(value)  # nothing to cache: a lookup
    elif kind == "judgments":
        return JudgmentsLabeler(value)
    elif kind in ("cosine", "bm25"):
        from measure.labelers.scores import BM25Labeler, CosineLabeler

        labeler = CosineLabeler(value, corpus) if kind == "cosine" else BM25Labeler(value)
    else:
        raise InputError(f"labeler: unknown kind {kind!r} in {spec!r}")
    if cache_dir is None:
        return labeler
    digest = hashlib.sha256(labeler.id.encode()).hexdigest()[:16]
    return CachedLabeler(labeler, Path(cache_dir) / f"labels-{digest}.jsonl")


def _seed(value: str, spec: str) -> int:
    try:
        return int(value or 0)
    except ValueError:
        raise InputError(f"labeler: {spec!r}: random takes a whole-number seed") from None
