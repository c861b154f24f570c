"""Evaluation, one folder per role (each importing only the folders before it; tests/test_layout.py
checks the order):

- ``eval.labelers``: the labelers (grader, judge, qrels, judgments, eRAG with its RAG reader
  ``eval.labelers.reader``, answers, gold documents) and the grader rerank of a run;
- ``eval.metrics``: the retrieval-metric library (ranx metrics with trec_eval's tie rule, paired
  tests, metric names), labelling runs, the ranking agreement between labelers, the settings an
  evaluation is made with;
- ``eval.classification``: held-out classification evaluation of graders and baselines
  (checkpoints, baselines, folds, comparison tables, plots);
- ``eval.human``: human judgments (PPI++ estimators, designs and the draw, judgment records and
  the session store, samples read against runs, coverage, recalibration);
- ``eval.annotate``: the judging page;
- ``eval.report``: the HTML report of an evaluation;
- ``eval.search``: the ``eval.search`` command (the metric pipeline);
- ``eval.api``: the eval_search REST service;
- ``eval.jobs``: the jobs that run several stages (the main job, the study, the README check).

The modules at eval's top are commands' names only (``python -m eval.ppi`` runs
``eval.human.draw``, ``eval.pipeline`` runs ``eval.jobs.pipeline``, ...).

Beside the product (run from a checkout, not installed): the benchmarks, the GPU kit and the
downstream experiment in ``benchmarks/``, the doubles they share with the tests in ``support/``.
``eval.bench`` only keeps the benchmarks' former command names (``python -m eval.bench.NAME``).
"""
