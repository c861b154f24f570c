"""Test doubles shared by the tests and the benchmarks (run from a checkout)."""
