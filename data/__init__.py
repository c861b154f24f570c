"""Data stage: record schemas and I/O, teacher labeling, candidate retrieval, dataset building."""
