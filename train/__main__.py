"""``relevance-grader train`` / ``accelerate launch -m train``: see train/train.py."""

from core.cli import run_main
from train.train import main

if __name__ == "__main__":
    run_main(main)
