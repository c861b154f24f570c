"""One HTML page per evaluation: ``relevance-grader report --input FOLDER`` (``relevance-grader
report``) reads an ``eval.search`` output folder or a main-job run folder and writes
``FOLDER/report.html``, a single self-contained file (styles, script, data and plots inline; it
asks no network for anything) with the headline estimates and their intervals, a per-query table
that opens each query's hits run by run, the labeler against people, the system ranking under
each labeler, the grader's held-out quality beside the baselines, and where it all came from.

Library: :func:`eval.report.build.build_report` (the page's data, plain Python) and
:func:`eval.report.page.write_report` (the page).
"""
