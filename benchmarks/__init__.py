"""Benchmarks that print a table; results go to docs/benchmarks/ with the machine and command,
the current figure of each to BENCHMARKS.md."""
