"""Deprecated alias: the scan for Hub tokens lives in :mod:`tapt.hub.secrets_scan`
(``tokens`` read like text tokens, as in :mod:`tapt.encoders.api.tokens`). Import from
there; this module will be removed."""

from __future__ import annotations

import warnings

from tapt.hub.secrets_scan import CHUNK, MIN_TOKEN_LENGTH, file_containing, known_tokens

warnings.warn("tapt.hub.tokens is deprecated: import from tapt.hub.secrets_scan",
              DeprecationWarning, stacklevel=2)

__all__ = ["CHUNK", "MIN_TOKEN_LENGTH", "file_containing", "known_tokens"]
