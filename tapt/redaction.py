"""Keeping credentials out of everything tapt writes or prints.

Tokens for the Hub, Weights & Biases and embedding APIs come from the environment (and
huggingface_hub's login cache); tapt never takes them as arguments. Whatever it writes or
prints (logs, the resolved recipe, results, metrics, model cards, exception messages) goes
through :func:`redact`, which replaces the values of the known secret variables and
anything shaped like a token (``hf_...``, ``sk-...``, ``pa-...``) by ``***``.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable

SECRET_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_TOKEN",
                    "WANDB_API_KEY", "OPENAI_API_KEY", "VOYAGE_API_KEY", "COHERE_API_KEY",
                    "ANTHROPIC_API_KEY")
TOKEN_SHAPES = re.compile(r"\b(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_\-]{20,}|"
                          r"pa-[A-Za-z0-9_\-]{20,})")
"""Hub (``hf_``), OpenAI (``sk-``) and Voyage (``pa-``) token shapes."""
MIN_SECRET_LENGTH = 8
MASK = "***"


def secret_values() -> list[str]:
    """The values of the secret variables set now (long enough to be real secrets)."""
    values = (os.environ.get(name, "").strip() for name in SECRET_VARIABLES)
    return sorted({value for value in values if len(value) >= MIN_SECRET_LENGTH},
                  key=len, reverse=True)


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every secret value, each of ``extra`` (secrets a caller holds, such as
    an API key or the Hub tokens of the login cache) and token-shaped strings replaced by
    ``***``."""
    values = set(secret_values()) | {value for value in extra if value}
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, MASK)
    return TOKEN_SHAPES.sub(MASK, text)


def redact_data(value):
    """:func:`redact` applied to every string in nested dicts and lists (JSON-like data)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_data(k): redact_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(v) for v in value]
    return value


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's formatted message."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def install_log_redaction() -> None:
    """Redact every record that reaches the root logger's handlers (idempotent)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
