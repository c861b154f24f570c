"""Labelers: who decides whether a retrieved hit is relevant, behind one interface.

- ``grader:PATH``: an exported (or checkpoint) grader: P(relevant) and the stored threshold;
- ``judge:CONFIG.yaml``: an LLM judge through the teacher backends (data.judges), grade + rationale;
- ``qrels:PATH``: human judgments (unjudged hits count as not relevant);
- ``judgments:PATH``: a judgments JSONL (from ``python -m data.label``).

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

from data.beir import graded_qrels, read_qrels
from data.io import JsonlAppender, iter_json_lines, read_records, sha256_path
from data.records import DEFAULT_RELEVANCE_THRESHOLD, Judgment, Pair, label_from_grade


@dataclass
class HitLabel:
    relevant: bool
    score: float | None = None  # P(relevant) for graders
    grade: int | None = None  # 0-3 where the labeler grades
    justification: str | None = None
    input_tokens: int = 0
    threshold: float | None = None  # the decision threshold behind a probability score

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


class GraderLabeler(Labeler):
    def __init__(self, path: str, grader: Any = None) -> None:
        from models.grader import Grader

        self.path = path
        self.grader = grader or Grader.from_pretrained(path)
        self.name = f"grader:{path}"
        self._weights_digest: str | None = None

    @property
    def id(self) -> str:
        # Keyed on the weights' content, not the path: a re-export to the same folder must not
        # be served the previous grader's labels.
        if self._weights_digest is None:
            path = Path(self.path)
            self._weights_digest = sha256_path(path) if path.exists() else str(path)
        return (
            f"grader:{self._weights_digest}:{self.grader.input_format.id}:"
            f"{self.grader.threshold}:{self.grader.temperature}"
        )

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
        scores = self.grader.score_ids(input_ids, pairs.prefix_lengths if pairs else None)
        out, position = [], 0
        for _, _, hits in requests:
            labels = []
            for _ in hits:
                p = float(scores[position])
                labels.append(
                    HitLabel(
                        relevant=p >= self.grader.threshold,
                        score=p,
                        input_tokens=len(input_ids[position]),
                        threshold=self.grader.threshold,
                        justification=(
                            f"grader P(relevant) = {p:.3f} "
                            f"{'>=' if p >= self.grader.threshold else '<'} "
                            f"threshold {self.grader.threshold:.3f}"
                        ),
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
            HitLabel(relevant=bool(label_from_grade(g, self.threshold)), grade=g)
            for g in (max(0, min(3, judged.get(hit.doc_id, 0))) for hit in hits)
        ]

    def num_relevant(self, qid: str) -> int:
        return sum(1 for g in self.qrels.get(qid, {}).values() if g >= self.threshold)


class JudgmentsLabeler(Labeler):
    def __init__(self, path: str) -> None:
        self.judgments = {
            (j.qid, j.doc_id): j for j in read_records(path, Judgment) if j.error is None
        }
        self.name = f"judgments:{path}"

    def label(self, qid: str, query: str, hits: Sequence[Hit]) -> list[HitLabel]:
        labels = []
        for hit in hits:
            judgment = self.judgments.get((qid, hit.doc_id))
            if judgment is None:
                raise KeyError(
                    f"{self.name}: no judgment for query {qid!r}, document {hit.doc_id!r}"
                )
            labels.append(hit_label(judgment))
        return labels


class JudgeLabeler(Labeler):
    """An LLM judge (any teacher backend) configured by a YAML file of JudgeConfig fields."""

    def __init__(self, config_path: str) -> None:
        import yaml

        from data.judges.backends import JudgeConfig, make_backend
        from data.judges.prompts import load_prompt

        settings = yaml.safe_load(Path(config_path).read_text()) or {}
        fields = set(JudgeConfig.__dataclass_fields__)
        unknown = set(settings) - fields
        if unknown:
            raise ValueError(f"{config_path}: unknown judge settings {sorted(unknown)}")
        self.config = JudgeConfig(**settings)
        self.prompt = load_prompt(self.config.prompt)
        self.backend = make_backend(self.config, self.prompt)
        self.name = f"judge:{self.config.backend}:{self.config.model}:{self.prompt.id}"

    def label(self, qid: str, query: str, hits: Sequence[Hit]) -> list[HitLabel]:
        pairs = [
            Pair(qid=qid, query=query, doc_id=h.doc_id, text=h.text, title=h.title) for h in hits
        ]
        results: dict[str, Judgment] = {}
        self.backend.run(pairs, lambda j: results.__setitem__(j.doc_id, j))
        labels = []
        for hit in hits:
            judgment = results[hit.doc_id]
            if judgment.error is not None:
                raise RuntimeError(f"judge failed on document {hit.doc_id!r}: {judgment.error}")
            labels.append(hit_label(judgment))
        return labels


class CachedLabeler(Labeler):
    """Labels cached in an append-only JSONL (one flushed line per label), reused across runs."""

    def __init__(self, inner: Labeler, cache_path: str | Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.cache_path = Path(cache_path)
        self.cache: dict[str, HitLabel] = {}
        if self.cache_path.exists():
            for _, obj in iter_json_lines(self.cache_path, tolerate_partial_last_line=True):
                if isinstance(obj, dict):
                    self.cache[obj["key"]] = HitLabel(**obj["label"])
        self.appender = JsonlAppender(self.cache_path)
        self.hits = 0

    @property
    def id(self) -> str:
        return self.inner.id

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
        missing = [m for m in missing if m[2]]
        if missing:
            fresh = self.inner.label_many(missing)
            for (_, query, hits), labels in zip(missing, fresh, strict=True):
                for hit, label in zip(hits, labels, strict=True):
                    key = self.key(query, hit)
                    self.cache[key] = label
                    self.appender.write({"key": key, "label": asdict(label)})
        self.hits += sum(len(ks) for ks in keys) - sum(len(m[2]) for m in missing)
        return [[self.cache[k] for k in ks] for ks in keys]

    def close(self) -> None:
        self.appender.close()


def make_labeler(spec: str, cache_dir: str | Path | None = None) -> Labeler:
    """``grader:PATH``, ``judge:CONFIG.yaml``, ``qrels:PATH`` or ``judgments:PATH``."""
    kind, _, value = spec.partition(":")
    if not value:
        raise ValueError(
            f"labeler: expected KIND:VALUE (grader:, judge:, qrels:, judgments:), got {spec!r}"
        )
    if kind == "grader":
        labeler: Labeler = GraderLabeler(value)
    elif kind == "judge":
        labeler = JudgeLabeler(value)
    elif kind == "qrels":
        return QrelsLabeler(value)  # nothing to cache: a lookup
    elif kind == "judgments":
        return JudgmentsLabeler(value)
    else:
        raise ValueError(f"labeler: unknown kind {kind!r} in {spec!r}")
    if cache_dir is None:
        return labeler
    digest = hashlib.sha256(labeler.id.encode()).hexdigest()[:16]
    return CachedLabeler(labeler, Path(cache_dir) / f"labels-{digest}.jsonl")
