"""The grid of a sweep: ``key=v1,v2`` texts parsed into axes, and each trial's folder name.

A key's values are split on top-level commas only (commas inside ``[]``, ``{}``, ``()`` or
quotes stay); each value is an ordinary recipe override. A trial folder is named by its
varying overrides plus a short hash of all of them; a value that holds a secret is named by
a digest. Used by :mod:`tapt.selection.sweep`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from tapt.recipe import RecipeError
from tapt.util.redaction import redact

SEED_KEY = "training.seed"
MAX_SLUG = 80
"""Characters of a trial folder's readable part (the hash follows)."""

_OPENERS = {"[": "]", "{": "}", "(": ")"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")


@dataclass(frozen=True)
class Axis:
    """A swept key and its values (override texts, as given)."""

    key: str
    values: tuple[str, ...]



def split_values(text: str) -> list[str]:
    """``a,[1,2],'x,y'`` -> ``["a", "[1,2]", "'x,y'"]``: split on commas outside brackets
    and quoted scalars. Raises :class:`RecipeError` on unbalanced brackets or quotes."""
    values, current, closers, quote = [], [], [], None
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"" and "".join(current).rstrip()[-1:] in ("", *_OPENERS, ",", ":"):
            quote = char  # a quote that starts a YAML scalar (not the one in "it's")
        elif char in _OPENERS:
            closers.append(_OPENERS[char])
        elif char in _OPENERS.values():
            if not closers or closers.pop() != char:
                raise RecipeError(f"unbalanced {char!r} in {text!r}")
        elif char == "," and not closers:
            values.append("".join(current))
            current = []
            continue
        current.append(char)
    if quote or closers:
        raise RecipeError(f"unclosed {quote or closers[-1]!r} in {text!r}")
    values.append("".join(current))
    return [value.strip() for value in values]


def parse_axis(text: str) -> Axis:
    """``training.learning_rate=1e-5,2e-5`` -> an :class:`Axis`; an empty value is an error
    (write ``''`` for an empty string)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise RecipeError(f"sweep axis {text!r}: expected dotted.key=value1,value2,...")
    try:
        values = split_values(raw)
    except RecipeError as err:
        raise RecipeError(f"sweep axis {key}: {err}") from None
    if any(not value for value in values):
        raise RecipeError(f"sweep axis {key}: an empty value in {raw!r} (write '' for an "
                          "empty string)")
    if len(set(values)) < len(values):
        raise RecipeError(f"sweep axis {key}: a value is given twice in {raw!r}")
    if key == "output_dir":
        raise RecipeError("sweep axis output_dir: each trial gets its own folder under the "
                          "sweep folder; choose that with --output")
    return Axis(key, tuple(values))


def build_axes(texts: list[str], seeds: list[int] | None) -> list[Axis]:
    """The axes of ``key=v1,v2`` texts plus ``seeds`` as :data:`SEED_KEY` (last)."""
    axes = [parse_axis(text) for text in texts]
    keys = [axis.key for axis in axes]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise RecipeError(f"sweep axis {twice[0]} is given more than once; give all its "
                          "values in one key=v1,v2")
    if seeds is not None:
        if SEED_KEY in keys:
            raise RecipeError(f"give the seeds once: --seeds or {SEED_KEY}=..., not both")
        if len(set(seeds)) < len(seeds):
            raise RecipeError(f"--seeds: a seed is given twice ({seeds})")
        axes.append(Axis(SEED_KEY, tuple(str(seed) for seed in seeds)))
    if not any(len(axis.values) > 1 for axis in axes):
        raise RecipeError("nothing to sweep: give a key with several values "
                          "(key=v1,v2) or several --seeds")
    return axes


def trial_name(overrides: list[str], varying: set[str]) -> str:
    """A filesystem-safe folder name: the varying overrides (last key part) and a hash of
    all of them, e.g. ``learning_rate=2e-05_seed=0-1a2b3c4d``."""
    digest = hashlib.sha256(json.dumps(sorted(overrides)).encode()).hexdigest()[:8]
    parts = []
    for override in overrides:
        key, _, value = override.partition("=")
        if key in varying:
            short = "seed" if key == SEED_KEY else key.rsplit(".", 1)[-1]
            parts.append(f"{_UNSAFE.sub('-', short)}={name_part(value)}")
    slug = "_".join(parts)[:MAX_SLUG].strip("-._") or "trial"
    return f"{slug}-{digest}"


def name_part(value: str) -> str:
    """``value`` as it may appear in a folder name: unsafe characters replaced, and a value
    that holds a secret (a known secret's value or a token shape, which
    :func:`tapt.util.redaction.redact` would replace) named by a digest instead."""
    if redact(value) != value:
        return "redacted-" + hashlib.sha256(value.encode()).hexdigest()[:8]
    return _UNSAFE.sub("-", value).strip("-.")
