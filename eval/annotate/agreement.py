"""``python -m eval.annotate.agreement``: the command's name; it lives in
:mod:`judgments.annotate.agreement`."""

from core.cli import run_main
from judgments.annotate.agreement import main

if __name__ == "__main__":
    run_main(main)
