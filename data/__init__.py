"""Data stage: record schemas and I/O, teacher labeling, candidate retrieval, dataset building."""

from pathlib import Path

# The committed collections (BEIR layout, with their sources and licences in its README).
COLLECTIONS = Path(__file__).resolve().parent / "collections"
