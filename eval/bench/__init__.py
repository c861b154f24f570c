"""The benchmarks' former name: they moved beside the product to ``benchmarks/`` (issue 53; run
from a checkout, not installed). So that ``python -m eval.bench.NAME``, named in older docs and
issues, still runs ``benchmarks/NAME.py`` or ``benchmarks/gpu/NAME.py``, this package's modules
are looked up in those folders; nothing in the product imports them."""

from pathlib import Path

_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
__path__ = [str(_BENCHMARKS), str(_BENCHMARKS / "gpu")]
