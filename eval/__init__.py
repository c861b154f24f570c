"""Evaluation stage, by concern:

- classification evaluation of graders and baselines: ``checkpoint``, ``baselines``, ``compare``,
  ``metrics``, ``plots``;
- the retrieval-metric library: ``search`` (metrics of runs under a labeler), ``labelers``,
  ``rerank``, ``ranking_agreement``;
- the REST service: ``eval.api`` (settings, schemas, batcher, server);
- the jobs that run several stages: ``eval.jobs`` (the main job and the quality study);
- the RAG reader of the eRAG labelers: ``eval.downstream.reader``.

Beside the product (run from a checkout, not installed): the benchmarks, the GPU kit and the
downstream experiment in ``benchmarks/``, the doubles they share with the tests in ``support/``.
``eval.bench`` only keeps the benchmarks' former command names (``python -m eval.bench.NAME``).
"""
