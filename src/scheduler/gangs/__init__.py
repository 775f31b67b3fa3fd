"""gangs: TODO docstring."""
