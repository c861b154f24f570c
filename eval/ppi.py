"""``python -m eval.ppi``: the command's name; the draw lives in :mod:`eval.human.draw` and the
PPI++ estimators in :mod:`eval.human.ppi`."""

from core.cli import run_main
from eval.human.draw import main

if __name__ == "__main__":
    run_main(main)
