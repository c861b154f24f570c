"""``python -m eval.search``: see :mod:`eval.search.command`."""

from core.cli import run_main
from eval.search.command import main

if __name__ == "__main__":
    run_main(main)
