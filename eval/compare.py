"""``python -m eval.compare``: the command's name; it lives in :mod:`eval.classification.compare`."""

from core.cli import run_main
from eval.classification.compare import main

if __name__ == "__main__":
    run_main(main)
