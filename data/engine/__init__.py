"""A TREC run straight from a search endpoint, so that evaluating a live engine needs no run file.

    relevance-grader run --engine data/configs/engines/opensearch.yaml --queries Q.jsonl \\
        --k 10 --out runs/engine/opensearch.trec
    relevance-grader run --engine my-pinecone.yaml --queries Q.jsonl --k 10 --out run.trec --texts

The engine YAML says how to ask and where the answer lies (:class:`EngineConfig`): the ``url``
and ``method``, a ``body`` template whose strings may hold ``{query}`` and ``{k}``, ``headers``
whose values may name environment variables (``Api-Key: ${PINECONE_API_KEY}``), ``timeout``,
``retries`` and the dotted paths of the ``hits`` list and of each hit's ``id``, ``score`` and
``text``. ``preset: pinecone | opensearch | elasticsearch | vespa`` starts from the file of that
name in ``data/configs/engines/`` (Pinecone's search records, ``result.hits[]._id/_score/fields``;
OpenSearch and Elasticsearch ``_search``, ``hits.hits[]._id/_score/_source``; Vespa's
``/search/``, ``root.children[].id/relevance/fields``), and the YAML's own keys override it.

Each query's answer is appended (flushed) to ``OUT.partial.jsonl`` as it arrives, so a stopped
run keeps every answered query and a re-run asks only the rest; the run (and with ``--texts`` the
hits' texts as ``OUT-STEM.corpus.jsonl``, for ``eval.search --corpus``) is written atomically at
the end and the partial file removed. 429, 5xx, connection errors and timeouts are retried with
backoff (``Retry-After`` read as RFC 9110 writes it); a 4xx is not (the request itself is
wrong), and a 3xx is an error naming where it points (never followed: the headers may hold a key). The parts: the YAML and its paths
(:mod:`data.engine.config`), the one HTTP client (:mod:`data.engine.client`, httpx), the command
(:mod:`data.engine.command`); docs/commands.md, "Runs straight from a search endpoint".

The run and its texts label like any other run:

    relevance-grader search --run run.trec --corpus run.corpus.jsonl --queries Q.jsonl \\
        --labeler grader:runs/export --out runs/search/engine
"""
