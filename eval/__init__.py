"""Evaluation stage, by concern:

- classification evaluation of graders and baselines: ``checkpoint``, ``baselines``, ``compare``,
  ``metrics``, ``plots``;
- the retrieval-metric library: ``search`` (metrics of runs under a labeler), ``labelers``,
  ``rerank``, ``ranking_agreement``;
- the REST service: ``eval.api`` (settings, schemas, batcher, server);
- the jobs that run several stages: ``eval.jobs`` (the main job and the quality study);
- research experiments: ``eval.downstream`` (eRAG and dual labels);
- benchmarks: ``eval.bench`` (run from a checkout, not installed).
"""
