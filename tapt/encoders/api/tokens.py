"""Client-side token counts, used to pack requests under a provider's token limits.

What the provider bills is read from each answer's ``usage`` field; these counts only
decide how many texts go into one request (and cut OpenAI inputs to 8,191 tokens).

- :class:`TiktokenCounter`: exact for OpenAI's models (``cl100k_base``), when ``tiktoken``
  is installed (``pip install "tapt[api]"``) and can load its encoding (it downloads it
  once, so it needs the network OpenAI needs anyway).
- :class:`ByteBound`: the UTF-8 length of the text, an upper bound on the tokens of any
  byte-level BPE tokenizer (each token covers at least one byte), so a request packed with
  it never exceeds a token limit. It over-counts English about 4x, so requests carry
  fewer texts than they could; Voyage truncates long inputs itself and its tokenizer is
  not bundled, so it uses this bound capped at the model's context length.
"""

from __future__ import annotations

import logging
from typing import Protocol

# tiktoken is imported when an OpenAI model counts tokens, not with tapt.

logger = logging.getLogger(__name__)


class TokenCounter(Protocol):
    name: str
    exact: bool
    """True when :meth:`count` is what the provider will count."""

    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str: ...


class ByteBound:
    """UTF-8 bytes: never fewer than a byte-level BPE tokenizer's tokens."""

    name = "utf8-bytes-bound"
    exact = False

    def count(self, text: str) -> int:
        return len(text.encode("utf-8"))

    def truncate(self, text: str, max_tokens: int) -> str:
        data = text.encode("utf-8")
        if len(data) <= max_tokens:
            return text
        return data[:max_tokens].decode("utf-8", errors="ignore")


class TiktokenCounter:
    """Exact token counts and truncation with a tiktoken encoding."""

    exact = True

    def __init__(self, encoding) -> None:
        self.encoding = encoding
        self.name = f"tiktoken:{encoding.name}"

    def count(self, text: str) -> int:
        return len(self.encoding.encode(text, disallowed_special=()))

    def truncate(self, text: str, max_tokens: int) -> str:
        ids = self.encoding.encode(text, disallowed_special=())
        return text if len(ids) <= max_tokens else self.encoding.decode(ids[:max_tokens])


def openai_counter(model: str) -> TokenCounter:
    """tiktoken's encoding for ``model`` when available, else :class:`ByteBound`."""
    try:
        import tiktoken
    except ImportError:
        logger.info("tiktoken is not installed: OpenAI requests are packed by UTF-8 bytes "
                    "(an upper bound on tokens); pip install 'tapt[api]' for exact counts")
        return ByteBound()
    try:
        try:
            encoding = tiktoken.encoding_for_model(model)
        except KeyError:
            encoding = tiktoken.get_encoding("cl100k_base")
    except Exception as err:  # tiktoken downloads its encoding files once  # noqa: BLE001
        logger.warning("tiktoken could not load an encoding for %s (%s); packing requests by "
                       "UTF-8 bytes instead", model, type(err).__name__)
        return ByteBound()
    return TiktokenCounter(encoding)
