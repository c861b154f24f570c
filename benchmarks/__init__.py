"""Benchmarks that print a table, listed with their shapes in suite.yaml and run by ``python -m
benchmarks``; results go to docs/benchmarks/ with the machine and command, the current figure of
each to BENCHMARKS.md."""
