"""Tests of the benchmarks (benchmarks/): the only tests that import them."""
