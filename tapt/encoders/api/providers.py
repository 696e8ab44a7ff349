"""OpenAI and Voyage AI embedding endpoints (``POST {base_url}/embeddings``)."""

from __future__ import annotations

from typing import ClassVar

from tapt.encoders.api.encoder import APIEncoder
from tapt.encoders.api.tokens import TokenCounter, openai_counter


class OpenAIEncoder(APIEncoder):
    """OpenAI embeddings (``text-embedding-3-large``, ``text-embedding-3-small``).

    Key from ``OPENAI_API_KEY``; ``OPENAI_BASE_URL`` (or ``base_url``) points it at a proxy
    or an OpenAI-compatible server. OpenAI has no query/document distinction: both kinds are
    embedded alike (the cache still keeps them apart). Embeddings are requested as base64
    float32 (``encoding_format``, what OpenAI's own SDK asks for: a quarter of the JSON);
    pass ``encoding_format="float"`` for a server that only returns lists. Inputs over
    8,191 tokens are cut (OpenAI refuses them).

    Example::

        encoder = OpenAIEncoder("text-embedding-3-large", dimensions=1024)
    """

    provider: ClassVar[str] = "openai"
    display_name: ClassVar[str] = "OpenAI"
    key_env: ClassVar[str] = "OPENAI_API_KEY"
    base_url_env: ClassVar[str] = "OPENAI_BASE_URL"
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"

    def __init__(self, model: str, *, encoding_format: str = "base64", **kwargs) -> None:
        if encoding_format not in ("base64", "float"):
            raise ValueError(f"encoding_format must be base64 or float, got {encoding_format!r}")
        self.encoding_format = encoding_format
        super().__init__(model, **kwargs)

    def default_counter(self) -> TokenCounter:
        return openai_counter(self.model)

    def payload(self, texts: list[str], input_type: str) -> dict:
        body = {"model": self.model, "input": texts, "encoding_format": self.encoding_format}
        if self.requested_dimensions is not None:
            body["dimensions"] = self.requested_dimensions
        return body


class VoyageEncoder(APIEncoder):
    """Voyage AI embeddings (``voyage-4-large``, ``voyage-3.5``, ...).

    Key from ``VOYAGE_API_KEY``; ``VOYAGE_BASE_URL`` (or ``base_url``) for a proxy. Queries
    are sent with ``input_type: "query"`` and passages with ``"document"`` (Voyage then
    prepends its own retrieval prompts), ``output_dimension`` always (256, 512, 1024 or
    2048; default 1024), ``truncation: true`` (the API cuts inputs to the model's 32,000
    tokens).

    Example::

        encoder = VoyageEncoder("voyage-3.5", dimensions=512)
    """

    provider: ClassVar[str] = "voyage"
    display_name: ClassVar[str] = "Voyage AI"
    key_env: ClassVar[str] = "VOYAGE_API_KEY"
    base_url_env: ClassVar[str] = "VOYAGE_BASE_URL"
    default_base_url: ClassVar[str] = "https://api.voyageai.com/v1"

    @property
    def requested_dimensions(self) -> int | None:
        return self.dimensions if self.info.dimension_choices is not None else None

    def payload(self, texts: list[str], input_type: str) -> dict:
        body = {"model": self.model, "input": texts, "input_type": input_type,
                "truncation": True}
        if self.requested_dimensions is not None:
            body["output_dimension"] = self.requested_dimensions
        return body
