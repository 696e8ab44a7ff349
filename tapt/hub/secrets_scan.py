"""Where tapt finds the Hub token(s) it must never publish, and the scan for them.

huggingface_hub authenticates every request itself (``HF_TOKEN``, then the login cache
written by ``hf auth login``; :func:`huggingface_hub.get_token`). tapt never takes a token as
an argument and never writes one: it only reads the same places to refuse an export folder
that contains one of those values, byte for byte, anywhere in any file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

# huggingface_hub is imported when the tokens are looked up, not with tapt.hub.

MIN_TOKEN_LENGTH = 8
"""Shorter values are not Hub tokens and would match random bytes in weight files."""
CHUNK = 8 << 20


def known_tokens(*, network: bool = True) -> list[str]:
    """Every Hub token this machine would use: ``HF_TOKEN`` / ``HUGGING_FACE_HUB_TOKEN``, the
    login cache and its stored tokens, and (``network=True``) :func:`huggingface_hub.get_token`,
    which may exchange an OIDC token or refresh an OAuth one over the network."""
    from huggingface_hub import constants

    found = [os.environ.get("HF_TOKEN"), os.environ.get("HUGGING_FACE_HUB_TOKEN")]
    try:
        found.append(Path(constants.HF_TOKEN_PATH).read_text(encoding="utf-8"))
    except OSError:
        pass
    try:
        from huggingface_hub.utils import get_stored_tokens

        found += list(get_stored_tokens().values())
    except (ImportError, OSError, ValueError):
        pass
    if network:
        from huggingface_hub import get_token

        found.append(get_token())
    tokens = (token.strip() for token in found if token)
    return list(dict.fromkeys(token for token in tokens if len(token) >= MIN_TOKEN_LENGTH))


def file_containing(paths: Iterable[Path], tokens: list[str]) -> Path | None:
    """The first file whose bytes contain one of ``tokens``, or None. Reads in chunks that
    overlap by a token's length, so multi-GB weights are scanned in constant memory."""
    needles = [token.encode() for token in tokens]
    if not needles:
        return None
    overlap = max(len(needle) for needle in needles) - 1
    for path in paths:
        tail = b""
        with path.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                window = tail + chunk
                if any(needle in window for needle in needles):
                    return path
                tail = window[-overlap:] if overlap else b""
    return None

