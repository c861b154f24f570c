"""``python -m data.engine``: see :mod:`data.engine.command`."""

from core.cli import run_main
from data.engine.command import main

if __name__ == "__main__":
    run_main(main)
