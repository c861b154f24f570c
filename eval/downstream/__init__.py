"""The RAG reader (``reader``) that the eRAG labelers (``eval.labelers``) and the downstream
experiment share. The experiment itself lives beside the product, in ``benchmarks/downstream``
(``python -m benchmarks.downstream``); ``python -m eval.downstream`` still runs it from a checkout.
"""
