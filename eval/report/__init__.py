"""One HTML page per evaluation: ``relevance-grader report --input FOLDER`` reads a
``relevance-grader search`` output folder, a main-job run folder or a ``relevance-grader zoo``
output folder and writes ``FOLDER/report.html``, a single self-contained file (styles, script,
data and plots inline; it asks no network for anything) with the headline estimates and their
intervals, a per-query table that opens each query's hits run by run, the labeler against people,
the labelers ranked by how they rank the zoo's systems (the labeler leaderboard), the system
ranking under each labeler, the grader's held-out quality beside the baselines, and where it all
came from (as much of it as the folder holds).

The folder is read once (:func:`eval.report.inputs.read_inputs`), and every rendering is made
from what was read: the page's data (:func:`eval.report.build.report_data`, plain Python; with
the read, :func:`eval.report.build.build_report`) and the page
(:func:`eval.report.page.write_page`, :func:`eval.report.page.write_report`); a main job's
report.md (:mod:`eval.report.markdown`) and the README's results block
(:mod:`eval.report.readme`, ``relevance-grader readme``); the PPI++ table
(:mod:`eval.report.ppi_markdown`), the leaderboard's Markdown
(:mod:`eval.report.leaderboard_markdown`) and the study's tables and plots
(:mod:`eval.report.study`).
"""
