"""``python -m eval.checkpoint``: the command's name; it lives in :mod:`eval.classification.checkpoint`."""

from core.cli import run_main
from eval.classification.checkpoint import main

if __name__ == "__main__":
    run_main(main)
