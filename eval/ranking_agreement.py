"""``python -m eval.ranking_agreement``: the command's name; it lives in :mod:`measure.metrics.ranking_agreement`."""

from core.cli import run_main
from measure.metrics.ranking_agreement import main

if __name__ == "__main__":
    run_main(main)
