"""Small files shipped with the package: a tiny tokenizer for tests and random-weight benchmarks."""

from pathlib import Path

TINY_TOKENIZER = Path(__file__).resolve().parent / "tiny-tokenizer"
