"""Refusing to score non-finite embeddings: re-exported from :mod:`tapt.finite`, where
tapt's finiteness helpers live (this module keeps the names importable from here)."""

from __future__ import annotations

from tapt.finite import NonFiniteEmbeddingsError, nonfinite_rows

__all__ = ["NonFiniteEmbeddingsError", "nonfinite_rows"]
