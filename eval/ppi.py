"""``python -m eval.ppi``: the command's name; the draw lives in :mod:`judgments.draw` and the
PPI++ estimators in :mod:`judgments.ppi`."""

from core.cli import run_main
from judgments.draw import main

if __name__ == "__main__":
    run_main(main)
