"""``python -m eval.compare``: the command's name; it lives in :mod:`measure.classification.compare`."""

from core.cli import run_main
from measure.classification.compare import main

if __name__ == "__main__":
    run_main(main)
