"""objects: TODO docstring."""
