"""The evaluation history: recorded eval.search evaluations in a SQLite or PostgreSQL store
(:mod:`eval.history.store`), recorded from a search folder (:mod:`eval.history.record`), and the
``history`` command's subcommands (:mod:`eval.history.__main__`)."""
