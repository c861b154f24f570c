"""``python -m eval.rerank``: the command's name; it lives in :mod:`eval.labelers.rerank`."""

from core.cli import run_main
from eval.labelers.rerank import main

if __name__ == "__main__":
    run_main(main)
