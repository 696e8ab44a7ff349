"""Family presets for the paper's encoders: pooling, prompts, lengths, remote code.

Values follow the models' own cards: Qwen3-Embedding pools the last token and puts an
instruction on queries only (``Instruct: {task}\\nQuery:{query}``, no space after
``Query:``); gte-large-en-v1.5 pools the CLS token; nomic-embed-text-v1.5 mean-pools
with ``search_query: `` / ``search_document: `` prefixes. Both of the latter ship their
own modelling code, so they need ``trust_remote_code``, which tapt never turns on by
itself: the recipe or the command line must ask for it.
"""

from __future__ import annotations

import re
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


PRESETS: dict[str, FamilyPreset] = {
    "qwen3": FamilyPreset("qwen3", pooling="lasttoken", query_prompt=qwen3_instruction(),
                          append_eos=True, default_model="Qwen/Qwen3-Embedding-0.6B"),
    "gte": FamilyPreset("gte", pooling="cls", needs_remote_code=True,
                        default_model="Alibaba-NLP/gte-large-en-v1.5"),
    "nomic": FamilyPreset("nomic", pooling="mean", query_prompt="search_query: ",
                          document_prompt="search_document: ", needs_remote_code=True,
                          default_model="nomic-ai/nomic-embed-text-v1.5"),
    "default": FamilyPreset("default", max_seq_length=None),
}


FAMILY_PATTERNS = {
    "qwen3": re.compile(r"qwen3"),
    "gte": re.compile(r"gte-(base|large)-en-v1\.5"),
    "nomic": re.compile(r"nomic-embed-text"),
}
"""What a model's name (its last two path parts) must contain to get a family's preset;
other GTE models (``thenlper/gte-*``, ``gte-Qwen2``) are plain and stay ``default``."""


def detect_family(model_name: str) -> str:
    """Guess the preset from a model id or path (``default`` when nothing matches)."""
    name = "/".join(model_name.replace("\\", "/").rstrip("/").split("/")[-2:]).lower()
    for family, pattern in FAMILY_PATTERNS.items():
        if pattern.search(name):
            return family
    return "default"


def get_preset(family: str, model_name: str = "") -> FamilyPreset:
    """The preset named ``family``; ``auto`` uses the preset recorded in a tapt export
    (:mod:`tapt.encoders.preset_record`), else detects it from ``model_name``."""
    if family == "auto" and model_name:
        from tapt.encoders.preset_record import read_preset_record

        record = read_preset_record(model_name)
        if record is not None:
            return FamilyPreset(record["family"], pooling=record.get("pooling"),
                                query_prompt=record.get("query_prompt"),
                                document_prompt=record.get("document_prompt"),
                                max_seq_length=record.get("max_seq_length"),
                                needs_remote_code=record.get("needs_remote_code", False),
                                append_eos=record.get("append_eos", False),
                                default_model=record.get("base_model"))
    if family == "auto":
        family = detect_family(model_name)
    if family not in PRESETS:
        raise ValueError(f"unknown model family '{family}'; choose one of "
                         f"{sorted(PRESETS)} or 'auto'")
    return PRESETS[family]
