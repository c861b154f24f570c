"""What a search is measured with, one folder per role (each importing only the folders before it;
tests/test_layout.py checks the order):

- ``measure.labelers``: every labeler (grader, judge, qrels, judgments, eRAG with its RAG reader
  ``measure.labelers.reader``, answers, gold documents) and the grader rerank of a run;
- ``measure.metrics``: the retrieval-metric library (ranx metrics with trec_eval's tie rule, paired
  tests, metric names), labelling runs, the ranking agreement between labelers, the settings an
  evaluation is made with;
- ``measure.classification``: held-out classification evaluation of graders and baselines
  (checkpoints, baselines, folds, comparison tables, plots).
"""
