"""Former home of the judging page, now :mod:`judgments.annotate`; its command names stay:
``python -m eval.annotate`` and ``python -m eval.annotate.agreement``."""
