"""Deprecated alias: the trainer's in-loop evaluator lives in :mod:`tapt.retrieval.in_loop`
(``evaluator`` was two letters from :mod:`tapt.retrieval.evaluate`, which does another job).
Import from there; this module will be removed."""

from __future__ import annotations

import warnings

from tapt.retrieval.in_loop import RetrievalEvaluator, model_retriever

warnings.warn("tapt.retrieval.evaluator is deprecated: import from tapt.retrieval.in_loop",
              DeprecationWarning, stacklevel=2)

__all__ = ["RetrievalEvaluator", "model_retriever"]
