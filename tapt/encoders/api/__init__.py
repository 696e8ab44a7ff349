"""Hosted embedding models (OpenAI, Voyage AI) as :class:`tapt.Encoder` subclasses.

``tapt eval --model openai:text-embedding-3-large`` (or ``voyage:voyage-3.5``) selects one.
Modules: ``models`` (limits and prices, with sources and date), ``tokens`` (client-side
token counts), ``ratelimit``, ``client`` (HTTP, retries, key redaction), ``cache`` (SQLite
store of embeddings), ``encoder`` (batching, concurrency, accounting), ``providers``.
"""

from __future__ import annotations

from tapt.encoders.api.cache import EmbeddingCache, default_cache_dir
from tapt.encoders.api.client import APIError, MalformedResponse, RetryPolicy
from tapt.encoders.api.encoder import APIEncoder, APIUsage
from tapt.encoders.api.models import MODELS, PRICE_DATE, ModelInfo
from tapt.encoders.api.providers import OpenAIEncoder, VoyageEncoder

ENCODERS: dict[str, type[APIEncoder]] = {"openai": OpenAIEncoder, "voyage": VoyageEncoder}


def is_api_model(name: str) -> bool:
    """True for ``openai:MODEL`` and ``voyage:MODEL``, and for ``openai:`` / ``voyage:``
    without a model, so that :func:`load_api_encoder` names the expected form (as a
    SentenceTransformer name it would get a Hub repo-id message)."""
    scheme, sep, _ = name.partition(":")
    return bool(sep) and scheme in ENCODERS


def load_api_encoder(name: str, **kwargs) -> APIEncoder:
    """``openai:MODEL`` / ``voyage:MODEL`` -> its encoder (``kwargs``: :class:`APIEncoder`'s)."""
    if not is_api_model(name):
        raise ValueError(f"{name!r} is not an API model (openai:MODEL or voyage:MODEL)")
    scheme, _, model = name.partition(":")
    return ENCODERS[scheme](model.strip(), **kwargs)


__all__ = [
    "ENCODERS",
    "MODELS",
    "PRICE_DATE",
    "APIEncoder",
    "APIError",
    "APIUsage",
    "EmbeddingCache",
    "MalformedResponse",
    "ModelInfo",
    "OpenAIEncoder",
    "RetryPolicy",
    "VoyageEncoder",
    "default_cache_dir",
    "is_api_model",
    "load_api_encoder",
]
