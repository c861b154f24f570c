"""One HTML page per evaluation: ``relevance-grader report --input FOLDER`` reads a
``relevance-grader search`` output folder, a main-job run folder or a ``relevance-grader zoo``
output folder and writes ``FOLDER/report.html``, a single self-contained file (styles, script,
data and plots inline; it asks no network for anything) with the headline estimates and their
intervals, a per-query table that opens each query's hits run by run, the labeler against people,
the labelers ranked by how they rank the zoo's systems (the labeler leaderboard), the system
ranking under each labeler, the grader's held-out quality beside the baselines, and where it all
came from (as much of it as the folder holds).

Library: :func:`eval.report.build.build_report` (the page's data, plain Python) and
:func:`eval.report.page.write_report` (the page).
"""
