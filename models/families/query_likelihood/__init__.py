"""The query-likelihood family, in one place: the family's scoring and export read-out
(:mod:`.family`: :data:`QUERY_LIKELIHOOD`), the batched primitives it scores with (the prompt,
the query's log-likelihood and PMI, the read-out's fit: :mod:`.scoring`) and its cached-state
head, the trained top and the read-out run on states of each pair and its query's prior
(:mod:`.states`). Its training is ``train/recipes/query_likelihood.py``."""

from models.families.query_likelihood.family import QUERY_LIKELIHOOD

__all__ = ["QUERY_LIKELIHOOD"]
