"""cli: TODO docstring."""
