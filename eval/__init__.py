"""Evaluation's commands and services, one folder per role (each importing only the folders before
it; tests/test_layout.py checks the order):

- ``eval.report``: the report of an evaluation, its folder read once, and every rendering of it
  (the HTML page, the main job's report.md, the README's block, the study's tables and plots);
- ``eval.zoo``: the labeler leaderboard on a zoo of retrieval systems;
- ``eval.history``: the evaluation history (store, comparisons, the gate, monitoring, the page);
- ``eval.search``: the ``search`` command (the metric pipeline);
- ``eval.api``: the eval_search REST service;
- ``eval.jobs``: the jobs that run several stages (the main job, the study); they call the
  report's renderings.

They build on the layers below: ``measure`` (the labelers, the retrieval-metric library,
held-out classification evaluation) and ``judgments`` (people's judgments: PPI++, designs, the
draw, the judging page, recalibration). Every command, theirs and the layers' below, is one entry
of the ``relevance-grader`` table (:mod:`core.commands`) pointing at the module that does the work.

Beside the product (run from a checkout, not installed): the benchmarks (the GPU one among
them) and the downstream experiment in ``benchmarks/``, the doubles they share with the tests
in ``support/``.
"""
