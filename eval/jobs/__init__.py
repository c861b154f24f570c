"""The jobs that run several stages: the main job (``eval.jobs.pipeline``: labels, dataset,
training, evaluation, export, retrieval runs and the metric pipeline, each stage a subprocess
that resumes by fingerprint) and the cross-validation study (``eval.jobs.study``: trains and
evaluates every fold in-process, resuming per fold). They orchestrate: what they write about a
run (report.md, report.html, study.md and its plots) is rendered by ``eval.report``. They are the
only part of ``eval`` that imports ``train``."""
