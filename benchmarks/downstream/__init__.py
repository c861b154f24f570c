"""The downstream experiment: which labeler tracks a RAG system's end-to-end quality (eRAG,
answer and gold-document labels, the grader and an LLM judge, dual document/word labels). It runs
from a checkout; the RAG reader it shares with the eRAG labelers stays in the product
(``measure.labelers.reader``).

    python -m benchmarks.downstream --config benchmarks/downstream/squad.yaml
"""
