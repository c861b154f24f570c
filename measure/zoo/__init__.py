"""The system zoo: many retrieval systems from the project's own parts, to judge labelers by."""
