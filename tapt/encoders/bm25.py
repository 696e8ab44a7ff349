"""Deprecated alias: ``BM25Retriever`` lives in :mod:`tapt.retrieval.bm25` (a retriever, not
an encoder). Import it from there; this module will be removed."""

from __future__ import annotations

import warnings

from tapt.retrieval.bm25 import BM25Retriever

warnings.warn("tapt.encoders.bm25 is deprecated: import BM25Retriever from tapt.retrieval.bm25",
              DeprecationWarning, stacklevel=2)

__all__ = ["BM25Retriever"]
