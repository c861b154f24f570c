"""The grader model: input formatting, loading, building, losses, export."""
