"""Training stage: ``relevance-grader train`` fine-tunes a grader in any mode through one
``Trainer`` (``train.trainer``), set up by its scoring family's recipe (``train.recipes``)."""
