"""People in the loop: a judging page in the browser (``relevance-grader annotate``).

The page pools each sampled query's top-k hits across runs, shows one hit at a time with the query's
terms highlighted and the 0-3 scale in words, and keeps every judgment on disk as it is made
(append-only); ``eval.search --human`` and ``relevance-grader recalibrate`` read its output through
:func:`judgments.store.read_judgments`. Each assessor judges through a secret link, in an order of
their own, blind to the labeler until their session is finished. See docs/judging.md.

- :mod:`judgments.annotate.pool`: the sample and each query's pooled hits, in a hashed order;
- :mod:`judgments.store`: the session folder (session.json, judgments.jsonl, qrels.txt);
- :mod:`judgments.annotate.app`: the web app and its page (page.html, everything inline);
- :mod:`judgments.annotate.agreement`: two or more assessors' agreement and their disagreements.
"""
