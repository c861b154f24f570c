"""Test doubles of the evaluation side: labelers with scripted grades."""

from __future__ import annotations

from measure.labelers import HitLabel, Labeler


class DictLabeler(Labeler):
    """Grades from a dict; counts how often it is asked."""

    name = "dict"

    def __init__(self, grades: dict[str, int]) -> None:
        self.grades = grades
        self.calls = 0

    def label(self, qid, query, hits):
        self.calls += 1
        return [
            HitLabel(
                relevant=self.grades.get(h.doc_id, 0) >= 2,
                grade=self.grades.get(h.doc_id, 0),
                score=0.5,
                input_tokens=10,
            )
            for h in hits
        ]


class PoisonLabeler(DictLabeler):
    """Fails any call that contains the query "poison", like a pair that raises in a batch."""

    def label_many(self, requests):
        if any(query == "poison" for _, query, _ in requests):
            raise RuntimeError("poisoned pair")
        return super().label_many(requests)
