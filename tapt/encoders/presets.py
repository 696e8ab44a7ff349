"""Family presets for the paper's encoders: pooling, prompts, lengths, remote code.

Values follow the models' own cards: Qwen3-Embedding pools the last token and puts an
instruction on queries only (``Instruct: {task}\\nQuery:{query}``, no space after
``Query:``); gte-large-en-v1.5 pools the CLS token; nomic-embed-text-v1.5 mean-pools
with ``search_query: `` / ``search_document: `` prefixes. Both of the latter ship their
own modelling code, so they need ``trust_remote_code``, which tapt never turns on by
itself: the recipe or the command line must ask for it.

Families live in a registry: the built-ins (``qwen3``, ``gte``, ``nomic``, ``default``) are
registered by :func:`register_family` like any family a user adds from Python::

    import tapt
    tapt.register_family("e5", pooling="mean", prompts={"query": "query: ",
                         "document": "passage: "}, patterns=[r"\\be5-"], max_length=512)

after which ``family: e5`` (recipe), ``--family e5`` and ``family: auto`` for a model named
``intfloat/e5-base-v2`` use it. The registry itself lives in :mod:`tapt.util.families` (a
ground-floor module that the recipe schema reads); this module adds :func:`get_preset`. It
lives in the process: a recipe run by ``tapt train`` names the module that registers its family in
``model.family_module``.
"""

from __future__ import annotations

from tapt.encoders.preset_record import RECORD_FILE, PresetRecordError, read_preset_record
from tapt.util.families import (
    PRESETS,
    FamilyError,
    FamilyPreset,
    detect_family,
    registered_families,
)

__all__ = ["get_preset"]


def get_preset(family: str, model_name: str = "") -> FamilyPreset:
    """The preset named ``family``; ``auto`` uses the preset recorded in a tapt export
    (:mod:`tapt.encoders.preset_record`), else detects it from ``model_name``."""
    if family == "auto" and model_name:
        record = read_preset_record(model_name)
        if record is not None:
            if record.get("family") is None:
                raise PresetRecordError(f"{model_name}: its {RECORD_FILE} records no "
                                        "'family'; set model.family in the recipe")
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
        raise FamilyError(f"unknown model family '{family}'; choose one of "
                          f"{registered_families()} or 'auto' (tapt.register_family adds one)")
    return PRESETS[family]
