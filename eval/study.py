"""``python -m eval.study``: the command's name; the job itself lives in :mod:`eval.jobs.study`."""

from core.cli import run_main
from eval.jobs.study import main

if __name__ == "__main__":
    run_main(main)
