"""``python -m eval.annotate``: the command's name; the judging page lives in :mod:`judgments.annotate`."""

from core.cli import run_main
from judgments.annotate.__main__ import main

if __name__ == "__main__":
    run_main(main)
