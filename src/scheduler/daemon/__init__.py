"""daemon: TODO docstring."""
