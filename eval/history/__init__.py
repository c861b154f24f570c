"""The evaluation history: recorded eval.search evaluations in a SQLite or PostgreSQL store
(:mod:`eval.history.store`), recorded from a search folder (:mod:`eval.history.record`), and the
``relevance-grader history`` commands (``history record``, ``history gate``, ... in
:data:`core.commands.COMMANDS`), one module each."""
