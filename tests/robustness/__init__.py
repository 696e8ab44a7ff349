"""Hostile-input and fault tests; their outcomes make docs/reliability.md."""
