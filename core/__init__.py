"""The bottom layer: records and their I/O, the one keyed cache, command-line parsing and the
console script's dispatcher, the processes of a distributed launch, classification metrics and
the record of how a command ran. It imports nothing from the rest of the project, which all
builds on it (``tests/test_layout.py`` checks the direction)."""
