"""eval.search: the grader as labeler in the retrieval-metric pipeline (``python -m eval.search``).

- :mod:`eval.search.config`: the command's settings and the files it reads and writes;
- :mod:`eval.search.labelling`: every run's top-k hits through one labeler;
- :mod:`eval.search.metrics`: retrieval metrics through ranx (one query, pooled runs, paired tests);
- :mod:`eval.search.human`: people's judgments, read and checked against the runs and the draw;
- :mod:`eval.search.ppi_report`: the metrics corrected by those judgments (PPI++);
- :mod:`eval.search.command`: the command.

The library's entry points are :func:`evaluate_query` (one query's ranked hits) and :func:`main`.
"""

from eval.search.command import main
from eval.search.config import SearchEvalConfig
from eval.search.metrics import evaluate_query

__all__ = ["SearchEvalConfig", "evaluate_query", "main"]
