"""The retrieval-metric library: ranx metrics with trec_eval's tie rule, per query and pooled
over runs, paired tests (``retrieval``), the metric names ``--metrics`` takes (``names``) and the
settings an evaluation is made with, which its provenance records and the report reads back
(``settings``)."""
