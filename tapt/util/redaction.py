"""Keeping credentials out of everything tapt writes or prints.

Tokens for the Hub, Weights & Biases and embedding APIs come from the environment (and
huggingface_hub's login cache); tapt never takes them as arguments. The known secrets are
the values of :data:`SECRET_VARIABLES` set now (at least :data:`MIN_SECRET_LENGTH`
characters) and those a caller holds (``extra``: an API key, the login cache's tokens).
There are two redactions of them, for two kinds of output:

- free text (log records, printed lines, error messages, model cards, labels such as a
  W&B run name): :func:`redact` replaces the known secrets' values and anything shaped
  like a token (``hf_...``, ``sk-...``, ``pa-...``) by ``***``;
- structured data (result JSON and its ``per_query`` keys, TREC run files, metrics and
  mined files, ``results.json``, the recipe's values): :func:`redact_data` replaces the
  known secrets' exact values only, so an id that merely looks like a token
  (``pa-patent-application-query-0005``) is never rewritten. Where a secret's value occurs
  inside an id, secrecy wins: it is replaced there too, and a warning names the file and
  the field, whose value then no longer matches the data it came from.

:class:`RedactingConsole` (every line the CLI prints) and :func:`install_log_redaction`
(every log record) apply :func:`redact`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable

from rich.console import Console
from rich.text import Text

SECRET_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_TOKEN",
                    "WANDB_API_KEY", "OPENAI_API_KEY", "VOYAGE_API_KEY", "COHERE_API_KEY",
                    "ANTHROPIC_API_KEY")
TOKEN_SHAPES = re.compile(r"(?<![A-Za-z0-9])(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_\-]{20,}|"
                          r"pa-[A-Za-z0-9_\-]{20,})")
"""Hub (``hf_``), OpenAI (``sk-``) and Voyage (``pa-``) token shapes, wherever they start
but inside a word of letters and digits (``_`` and ``-`` before one count as a boundary:
``local__hf_...`` holds a token)."""
MIN_SECRET_LENGTH = 8
MASK = "***"


def known_secrets(extra: Iterable[str] = ()) -> dict[str, str]:
    """Each known secret's value -> what messages call it (its variable's name), longest
    value first (a secret that contains another is replaced whole)."""
    named: dict[str, str] = {}
    for name in SECRET_VARIABLES:
        value = os.environ.get(name, "").strip()
        if len(value) >= MIN_SECRET_LENGTH:
            named.setdefault(value, name)
    for value in extra:
        if value:
            named.setdefault(value, "a token tapt holds")
    return dict(sorted(named.items(), key=lambda item: len(item[0]), reverse=True))


def _replace_secrets(text: str, secrets: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with each of ``secrets`` replaced, and the names of those it held."""
    found = []
    for value, name in secrets.items():
        if value in text:
            text, found = text.replace(value, MASK), [*found, name]
    return text, found


def secret_in(text: str, extra: Iterable[str] = ()) -> str | None:
    """What secret ``text`` holds, in words: the value of a secret variable or of one of
    ``extra``, or a token-shaped string; None when it holds none."""
    for value, name in known_secrets(extra).items():
        if value in text:
            return f"the value of {name}" if name in SECRET_VARIABLES else "a token tapt holds"
    if TOKEN_SHAPES.search(text):
        return "a token-shaped string (hf_..., sk-..., pa-...)"
    return None


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """Free text: ``text`` with every known secret (the secret variables' values and each of
    ``extra``) and every token-shaped string replaced by ``***``."""
    text, _ = _replace_secrets(text, known_secrets(extra))
    return TOKEN_SHAPES.sub(MASK, text)


def redact_data(value, extra: Iterable[str] = (), *, where: str = "data",
                free_text: Iterable[str] = ()):
    """Structured data (nested dicts and lists, JSON-like): every string, keys included,
    with the exact value of each known secret replaced by ``***``; a token-shaped string is
    kept, except in the fields named in ``free_text`` (dotted paths such as
    ``tracking.run_name``: labels, not data), which get :func:`redact`.

    A secret's value found outside those fields is replaced all the same (secrecy first) and
    logged once as a warning naming ``where`` and the fields: their values no longer match
    the data they came from."""
    secrets, found = known_secrets(extra), {}
    cleaned = _redact_value(value, "", secrets, frozenset(free_text), found)
    if found:
        _warn_replaced(where, found)
    return cleaned


def _redact_value(value, path: str, secrets: dict[str, str], free_text: frozenset[str],
                  found: dict[str, list[str]]):
    if isinstance(value, str):
        if path in free_text:
            return redact(value, secrets)
        cleaned, names = _replace_secrets(value, secrets)
        if names:
            found[path or "the value"] = names
        return cleaned
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            name = key
            if isinstance(key, str):
                name, names = _replace_secrets(key, secrets)
                if names:
                    found[f"{path}.{name} (a key)" if path else f"{name} (a key)"] = names
            child = f"{path}.{name}" if path else str(name)
            result[name] = _redact_value(item, child, secrets, free_text, found)
        return result
    if isinstance(value, (list, tuple)):
        return [_redact_value(item, f"{path}[{number}]", secrets, free_text, found)
                for number, item in enumerate(value)]
    return value


_warned: set[str] = set()


def _warn_replaced(where: str, found: dict[str, list[str]]) -> None:
    names = sorted({name for found_names in found.values() for name in found_names})
    fields = list(found)
    shown = ", ".join(fields[:3]) + (f" and {len(fields) - 3} more" if len(fields) > 3 else "")
    message = (f"{where}: the value of {' and '.join(names)} occurs in {shown}; it is "
               f"written as {MASK} there (a secret is never written), so what is written "
               "there no longer matches the source data")
    if message not in _warned:
        _warned.add(message)
        logging.getLogger(__name__).warning("%s", message)


def install_log_redaction() -> None:
    """Redact every log record of every logger as it is made (idempotent), whatever handler
    prints it: libraries such as transformers print through handlers of their own."""
    make_record = logging.getLogRecordFactory()
    if getattr(make_record, "redacts", False):
        return

    def redacted_record(*args, **kwargs) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        try:
            message = record.getMessage()
        except (TypeError, ValueError, KeyError):  # malformed: its handler reports it
            return record
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return record

    redacted_record.redacts = True
    logging.setLogRecordFactory(redacted_record)


class RedactingConsole(Console):
    """A rich ``Console`` that redacts (:func:`redact`) every string it renders, before any
    line wrapping could cut a token in two: printed text, table cells, titles, rules."""

    def render_str(self, text: str, **kwargs) -> Text:
        return super().render_str(redact(text), **kwargs)
