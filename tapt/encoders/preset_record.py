"""The family preset an export was trained with, recorded next to its weights.

A DAPT export of GTE lives at ``runs/dapt-gte/final``: nothing in that path says "gte", so
``family: auto`` would fall back to the plain preset and a TAPT run started from it would
lose CLS pooling, the prompts or the maximum length. Every tapt export therefore writes
``tapt_preset.json`` (family, pooling, prompts, maximum length, EOS handling, whether the
model runs remote code, and the original base model through any chain of runs), and
loading a folder that holds one with ``family: auto`` uses it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RECORD_FILE = "tapt_preset.json"


def read_preset_record(name_or_path: str) -> dict[str, Any] | None:
    """The record in a local model folder (``package:`` paths resolved), or None."""
    from tapt.encoders.loading import PACKAGE_SCHEME, resolve_model_path

    try:
        folder = Path(resolve_model_path(name_or_path))
    except FileNotFoundError:
        return None
    if name_or_path.startswith(PACKAGE_SCHEME) or not (folder / RECORD_FILE).is_file():
        return None
    return json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))


def base_model_of(name_or_path: str) -> str:
    """The first model of a chain of tapt runs (a Hub id, a path, or ``package:...``)."""
    record = read_preset_record(name_or_path)
    return record["base_model"] if record and record.get("base_model") else name_or_path


def write_preset_record(folder: Path, model, spec, stage: str, **extra: Any) -> dict:
    """Record how ``model`` (a configured SentenceTransformer loaded from ``spec``) is used."""
    from sentence_transformers.sentence_transformer.modules import Pooling

    preset = spec.preset()
    pooling = next((m.pooling_mode for m in model if isinstance(m, Pooling)), None)
    record = {"family": preset.name, "pooling": pooling,
              "query_prompt": model.prompts.get("query", ""),
              "document_prompt": model.prompts.get("document", ""),
              "max_seq_length": model.max_seq_length, "append_eos": preset.append_eos,
              "needs_remote_code": preset.needs_remote_code,
              "base_model": base_model_of(spec.name_or_path), "stage": stage, **extra}
    from tapt.files import atomic_write_text

    atomic_write_text(folder / RECORD_FILE, json.dumps(record, indent=2) + "\n")
    return record
