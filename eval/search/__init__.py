"""eval.search: the grader as labeler in the retrieval-metric pipeline (``relevance-grader
search``).

- :mod:`eval.search.settings`: the command's flags and the files it reads and writes;
- :mod:`measure.metrics.results` (the metric library's records): what it writes, which the report,
  the history and the draws read back;
- :mod:`measure.metrics.labelling`: every run's top-k hits through one labeler (data in: the
  labeler, the runs, the corpus, the queries, k);
- :mod:`measure.metrics.retrieval`: retrieval metrics through ranx (one query, pooled runs, paired
  tests);
- :mod:`eval.search.human`: people's judgments as the flags give them, the draw's design and the
  random-sample check (reading a sample is :mod:`judgments.samples`);
- :mod:`eval.search.ppi_report`: the metrics corrected by those judgments (PPI++; their table is
  :mod:`eval.report.ppi_markdown`'s);
- :mod:`eval.search.command`: the command.

The library's entry points are :func:`evaluate_query` (one query's ranked hits) and :func:`main`.
"""

from eval.search.command import main
from eval.search.settings import SearchEvalConfig
from measure.metrics.retrieval import evaluate_query

__all__ = ["SearchEvalConfig", "evaluate_query", "main"]
