"""LLM (and human) judges behind one interface; see data.label for the command."""
