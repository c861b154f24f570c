"""``python -m eval.downstream``: the downstream experiment (:mod:`eval.downstream.experiment`)."""

from data.core.cli import run_main
from eval.downstream.experiment import main

if __name__ == "__main__":
    run_main(main)
