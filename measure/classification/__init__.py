"""Held-out classification evaluation: checkpoints, baselines, cross-validation read-outs,
comparison tables and plots."""
