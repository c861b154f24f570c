from data.cli import run_main
from eval.search.command import main

run_main(main)
