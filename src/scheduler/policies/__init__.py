"""policies: TODO docstring."""
