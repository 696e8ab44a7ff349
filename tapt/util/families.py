"""The model-family registry: what ``family: NAME`` means (pooling, prompts, name patterns,
maximum length, remote code), for recipes, the command line and
:class:`~tapt.encoders.loading.ModelSpec`.

A ground-floor module (standard library only), so that the recipe schema can check a
family name at module top without importing the encoders. The built-ins (``qwen3``, ``gte``,
``nomic``, ``default``) are registered here by :func:`register_family` like any family a
user adds from Python; :func:`tapt.encoders.presets.get_preset` turns a name into its
preset (and also reads a tapt export's recorded preset).

Example::

    from tapt.util.families import register_family, detect_family
    register_family("e5", pooling="mean", patterns=[r"\\be5-"], max_length=512)
    detect_family("intfloat/e5-base-v2")   # "e5"
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

FORMBENCH_TASK = ("Given a question about a chemical formulation, retrieve the patent "
                  "passage that answers it")
"""Default Qwen3 instruction for FormBench queries."""

PAPER_MAX_LENGTH = 2048
"""Encoding length used in the paper (covers 99.87% of FormBench passages)."""


def qwen3_instruction(task: str = FORMBENCH_TASK) -> str:
    """Qwen3-Embedding's query prompt for ``task``, exactly as its model card writes it."""
    return f"Instruct: {task}\nQuery:"


@dataclass(frozen=True)
class FamilyPreset:
    """How one encoder family is meant to be used."""

    name: str
    pooling: str | None = None
    """Pooling mode; None keeps the model's own."""
    query_prompt: str | None = None
    document_prompt: str | None = None
    max_seq_length: int | None = PAPER_MAX_LENGTH
    """None keeps the model's own."""
    needs_remote_code: bool = False
    append_eos: bool = False
    """Make the tokenizer end every input with EOS (last-token pooling reads it)."""
    default_model: str | None = None


POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
"""sentence-transformers' ``Pooling.POOLING_MODES`` (copied, so that importing tapt does not
import torch; a test keeps the two equal)."""

PROMPT_KEYS = ("query", "document")
FAMILY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

PRESETS: dict[str, FamilyPreset] = {}
"""The registered families by name (fill it with :func:`register_family` only)."""

FAMILY_PATTERNS: dict[str, tuple[re.Pattern[str], ...]] = {}
"""What a model's name (its last two path parts, lower-cased) must contain to get a
family's preset with ``family: auto``, in registration order."""


class FamilyError(ValueError):
    """A family that cannot be registered, or a name that is not registered."""


def register_family(name: str, *, pooling: str | None = None,
                    prompts: Mapping[str, str] | None = None,
                    patterns: Iterable[str | re.Pattern[str]] = (),
                    max_length: int | None = None, needs_remote_code: bool = False,
                    append_eos: bool = False, default_model: str | None = None,
                    overwrite: bool = False) -> FamilyPreset:
    """Register a model family, so that ``family: NAME`` (recipes, ``--family``, ``ModelSpec``)
    selects it and ``family: auto`` picks it for model names that match one of ``patterns``.

    Args:
        name: Letters, digits, ``.``, ``_`` and ``-``; not ``auto``.
        pooling: A sentence-transformers pooling mode (:data:`POOLING_MODES`); None keeps
            the model's own.
        prompts: ``{"query": ..., "document": ...}`` (either key may be left out).
        patterns: Regular expressions searched (case-insensitively) in the model name's
            last two path parts. Families are tried newest registration first, so a family
            registered later wins over the built-ins; a name that no pattern matches is
            ``default``.
        max_length: Maximum sequence length in tokens; None keeps the model's own.
        needs_remote_code: The model ships its own code (loading then requires
            ``trust_remote_code``, which tapt never turns on by itself).
        append_eos: Make the tokenizer end every input with EOS (for last-token pooling).
        default_model: The family's reference model (informational).
        overwrite: Replace a family of that name (else registering it again is an error).

    Returns:
        The registered :class:`FamilyPreset`.

    Raises:
        FamilyError: an argument is invalid (the message names it), or ``name`` is taken.

    Example::

        register_family("e5", pooling="mean", prompts={"query": "query: ",
                        "document": "passage: "}, patterns=[r"\\be5-"], max_length=512)
    """
    where = f"register_family({name!r})"
    if not isinstance(name, str) or not FAMILY_NAME.fullmatch(name) or name == "auto":
        raise FamilyError(f"{where}: a family name is letters, digits, '.', '_' and '-' "
                          "(starting with a letter or digit), and not 'auto'")
    if name in PRESETS and not overwrite:
        raise FamilyError(f"{where}: a family of that name is registered already; pass "
                          "overwrite=True to replace it")
    if pooling is not None and pooling not in POOLING_MODES:
        raise FamilyError(f"{where}: pooling {pooling!r} is not a sentence-transformers "
                          f"pooling mode; choose one of {list(POOLING_MODES)} or None")
    prompts = dict(prompts or {})
    unknown = sorted(set(prompts) - set(PROMPT_KEYS), key=str)
    if unknown:
        raise FamilyError(f"{where}: prompts keys are 'query' and 'document', not {unknown}")
    if any(not isinstance(text, str) for text in prompts.values()):
        raise FamilyError(f"{where}: every prompt must be a string")
    if max_length is not None and (isinstance(max_length, bool) or
                                   not isinstance(max_length, int) or max_length <= 0):
        raise FamilyError(f"{where}: max_length must be a positive whole number of tokens "
                          f"or None, got {max_length!r}")
    if isinstance(patterns, (str, re.Pattern)):
        patterns = [patterns]
    compiled = []
    for pattern in patterns:
        if isinstance(pattern, re.Pattern):
            compiled.append(pattern)
            continue
        if not isinstance(pattern, str) or not pattern:
            raise FamilyError(f"{where}: a pattern must be a non-empty regular expression "
                              f"string, got {pattern!r}")
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except re.error as err:
            raise FamilyError(f"{where}: pattern {pattern!r} is not a regular expression "
                              f"({err})") from None
    preset = FamilyPreset(name, pooling=pooling, query_prompt=prompts.get("query"),
                          document_prompt=prompts.get("document"), max_seq_length=max_length,
                          needs_remote_code=bool(needs_remote_code),
                          append_eos=bool(append_eos), default_model=default_model)
    unregister_family(name, missing_ok=True)  # re-registered: newest, so tried first
    PRESETS[name] = preset
    FAMILY_PATTERNS[name] = tuple(compiled)
    return preset


def unregister_family(name: str, *, missing_ok: bool = False) -> None:
    """Forget a registered family (``default``, the fallback of ``auto``, stays)."""
    if name == "default" and name in PRESETS and not missing_ok:
        raise FamilyError("unregister_family('default'): the default family cannot be "
                          "removed (family: auto falls back to it)")
    if name not in PRESETS and not missing_ok:
        raise FamilyError(f"unregister_family({name!r}): no such family; registered: "
                          f"{registered_families()}")
    PRESETS.pop(name, None)
    FAMILY_PATTERNS.pop(name, None)


def registered_families() -> list[str]:
    """The names ``family`` accepts besides ``auto``, sorted.

    Returns:
        The registered family names: the built-ins (``default``, ``gte``, ``nomic``,
        ``qwen3``) and those added by :func:`register_family`.

    Example::

        registered_families()  # ['default', 'gte', 'nomic', 'qwen3']
    """
    return sorted(PRESETS)


# Built-ins, registered like any family. Registered in this order so that, newest first,
# qwen3 is tried before gte before nomic, as before the registry. Other GTE models
# (``thenlper/gte-*``, ``gte-Qwen2``) are plain and stay ``default``.
register_family("default")
register_family("nomic", pooling="mean", max_length=PAPER_MAX_LENGTH,
                prompts={"query": "search_query: ", "document": "search_document: "},
                patterns=[r"nomic-embed-text"], needs_remote_code=True,
                default_model="nomic-ai/nomic-embed-text-v1.5")
register_family("gte", pooling="cls", max_length=PAPER_MAX_LENGTH,
                patterns=[r"gte-(base|large)-en-v1\.5"], needs_remote_code=True,
                default_model="Alibaba-NLP/gte-large-en-v1.5")
register_family("qwen3", pooling="lasttoken", max_length=PAPER_MAX_LENGTH,
                prompts={"query": qwen3_instruction()}, patterns=[r"qwen3"], append_eos=True,
                default_model="Qwen/Qwen3-Embedding-0.6B")


def detect_family(model_name: str) -> str:
    """Guess the family from a model id or path: the newest registered family with a
    pattern found in the name's last two path parts, else ``default``."""
    name = "/".join(model_name.replace("\\", "/").rstrip("/").split("/")[-2:]).lower()
    for family in reversed(FAMILY_PATTERNS):
        if any(pattern.search(name) for pattern in FAMILY_PATTERNS[family]):
            return family
    return "default"
