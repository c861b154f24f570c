"""``python -m eval.downstream``, the downstream experiment's former name (docs, issues): the
experiment moved beside the product to ``benchmarks/downstream`` (issue 53), so this runs it by
name from a checkout, without importing it (the product imports no benchmark)."""

import runpy


def main() -> None:
    runpy.run_module("benchmarks.downstream", run_name="__main__")


if __name__ == "__main__":
    main()
