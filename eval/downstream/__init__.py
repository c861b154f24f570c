"""Research experiments on downstream labels: which labeler tracks a RAG system's end-to-end
quality (``experiment``: eRAG, answer and gold-document labels, the grader and an LLM judge,
dual document/word labels), and the RAG reader they share (``reader``).

    python -m eval.downstream --config eval/configs/squad.yaml
"""
