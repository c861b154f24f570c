"""Benchmarks that print a table; results go to BENCHMARKS.md with the machine and command."""
