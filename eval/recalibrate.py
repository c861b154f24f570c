"""``python -m eval.recalibrate``: the command's name; the refit lives in
:mod:`eval.human.recalibrate`."""

from core.cli import run_main
from eval.human.recalibrate import main

if __name__ == "__main__":
    run_main(main)
