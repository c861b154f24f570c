"""``python -m eval.pipeline``: the command's name; the job itself lives in :mod:`eval.jobs.pipeline`."""

from core.cli import run_main
from eval.jobs.pipeline import main

if __name__ == "__main__":
    run_main(main)
