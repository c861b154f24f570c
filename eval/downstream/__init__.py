"""The former name of the downstream experiment's command: ``python -m eval.downstream`` runs
``benchmarks.downstream`` from a checkout (the experiment lives beside the product; the RAG reader
it shares with the eRAG labelers is ``measure.labelers.reader``)."""
