"""The metric library's labelling takes data: a labeler, the runs, the texts and k (no command's
settings), as ranx's ``evaluate(qrels, run, metrics)`` does."""

from __future__ import annotations

import pytest

from core.errors import InputError
from data.beir import Document
from measure.metrics.labelling import label_runs
from tests.doubles import DictLabeler

CORPUS = {doc: Document(doc, f"text of {doc}", title=f"title {doc}") for doc in "abcde"}
QUERIES = {"q1": "first query", "q2": "second query", "q3": "third query"}


class BatchCounter(DictLabeler):
    """Records the queries of each batch it is asked, and the hits' texts."""

    def __init__(self, grades: dict[str, int]) -> None:
        super().__init__(grades)
        self.batches: list[list[str]] = []
        self.texts: list[tuple[str, str, str | None]] = []

    def label_many(self, requests):
        self.batches.append([qid for qid, _, _ in requests])
        self.texts += [(query, h.text, h.title) for _, query, hits in requests for h in hits]
        return super().label_many(requests)


def test_each_run_s_top_k_is_labelled_from_the_texts_given_in_batches_of_queries():
    runs = {
        "bm25": {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"d": 1.0}, "q3": {"e": 1.0}},
        "dense": {"q1": {"c": 5.0, "a": 4.0}},
    }
    labeler = BatchCounter({"a": 3, "c": 1})

    results = label_runs(labeler, runs, CORPUS, QUERIES, 2, batch_queries=2)

    assert [hit.id for hit in results["bm25"]["q1"].hits] == ["a", "b"]  # the top k = 2, ranked
    assert [hit.id for hit in results["dense"]["q1"].hits] == ["c", "a"]
    assert [(h.grade, h.relevant) for h in results["bm25"]["q1"].hits] == [(3, True), (0, False)]
    assert results["bm25"]["q1"].usage.evaluation_input_tokens == 20  # 10 per labelled hit
    assert labeler.batches == [["q1", "q2"], ["q3"], ["q1"]]
    assert ("first query", "text of a", "title a") in labeler.texts
    assert results["bm25"]["q1"].metrics == {}  # set once the pool is scored


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ({"q9": {"a": 1.0}}, "query 'q9' of bm25 is not in the queries file"),
        ({"q1": {"zz": 1.0}}, "document 'zz' of bm25 is not in the corpus"),
    ],
)
def test_a_query_or_document_missing_from_the_texts_is_named(run, message):
    with pytest.raises(InputError, match=message):
        label_runs(DictLabeler({}), {"bm25": run}, CORPUS, QUERIES, 10)
