"""``python -m eval.rerank``: the command's name; it lives in :mod:`measure.labelers.rerank`."""

from core.cli import run_main
from measure.labelers.rerank import main

if __name__ == "__main__":
    run_main(main)
