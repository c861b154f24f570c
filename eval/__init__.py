"""Evaluation's commands and services, one folder per role (each importing only the folders before
it; tests/test_layout.py checks the order):

- ``eval.report``: the HTML report of an evaluation;
- ``eval.history``: the evaluation history (store, comparisons, the gate, monitoring, the page);
- ``eval.search``: the ``eval.search`` command (the metric pipeline);
- ``eval.api``: the eval_search REST service;
- ``eval.jobs``: the jobs that run several stages (the main job, the study, the README check).

They build on the layers below: ``measure`` (the labelers, the retrieval-metric library,
held-out classification evaluation) and ``judgments`` (people's judgments: PPI++, designs, the
draw, the judging page, recalibration). The modules at eval's top are commands' names only
(``python -m eval.ppi`` runs ``judgments.draw``, ``eval.pipeline`` runs ``eval.jobs.pipeline``,
``eval.annotate`` runs ``judgments.annotate``, ...).

Beside the product (run from a checkout, not installed): the benchmarks (the GPU one among
them) and the downstream experiment in ``benchmarks/``, the doubles they share with the tests
in ``support/``.
``eval.bench`` only keeps the benchmarks' former command names (``python -m eval.bench.NAME``).
"""
