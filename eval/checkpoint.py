"""``python -m eval.checkpoint``: the command's name; it lives in :mod:`measure.classification.checkpoint`."""

from core.cli import run_main
from measure.classification.checkpoint import main

if __name__ == "__main__":
    run_main(main)
