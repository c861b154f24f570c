"""The grader: input format, model resolver, scoring families (``models.families``), builder,
losses, batched scoring, ``Grader``, export and model card, and the LLM client layer."""
