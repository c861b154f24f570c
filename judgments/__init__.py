"""Human judgments: the PPI++ estimators (``ppi``) and the designs that draw a sample
(``design``, the draw command ``draw``), the judgments records and the judging session's store
(``store``), people's samples read against the runs (``samples``), the coverage the estimators
reached in simulation (``coverage``) and the threshold refit on judged queries (``recalibrate``).
The judging page that writes the judgments is ``judgments.annotate``, above these modules."""
