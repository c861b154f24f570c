"""``python -m benchmarks.downstream``: the downstream experiment
(:mod:`benchmarks.downstream.experiment`)."""

from benchmarks.downstream.experiment import main
from core.cli import run_main

if __name__ == "__main__":
    run_main(main)
