"""Evaluation stage: checkpoint metrics, baselines, reports, and the retrieval-metric pipeline."""
