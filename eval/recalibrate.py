"""``python -m eval.recalibrate``: the command's name; the refit lives in
:mod:`judgments.recalibrate`."""

from core.cli import run_main
from judgments.recalibrate import main

if __name__ == "__main__":
    run_main(main)
