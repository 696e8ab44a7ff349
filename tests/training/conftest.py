"""Fixtures for training tests live in tests/conftest.py (``synth_path``, ``make_recipe``),
shared with tests/robustness."""
