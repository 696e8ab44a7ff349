"""The family preset an export was trained with, recorded next to its weights.

A DAPT export of GTE lives at ``runs/dapt-gte/final``: nothing in that path says "gte", so
``family: auto`` would fall back to the plain preset and a TAPT run started from it would
lose CLS pooling, the prompts or the maximum length. Every tapt export therefore writes
``tapt_preset.json`` (family, pooling, prompts, maximum length, EOS handling, whether the
model runs remote code, and the original base model through any chain of runs), and
loading a folder that holds one with ``family: auto`` uses it.

The base model is recorded so that a published export names no path of this machine: a
Hub id with its revision, a ``package:`` name as is, a Hugging Face cache snapshot as its
Hub id and commit, any other local folder by its name only.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tapt.encoders.model_paths import PACKAGE_SCHEME, resolve_model_path
from tapt.util.families import FAMILY_NAME, POOLING_MODES
from tapt.util.files import atomic_write_json
from tapt.util.ids import is_hub_id
from tapt.util.json_file import read_json

# sentence-transformers (for its Pooling class) is imported in write_preset_record only:
# reading a record must not import torch.

logger = logging.getLogger(__name__)

RECORD_FILE = "tapt_preset.json"
MAX_RECORD_BYTES = 1 << 20
"""A record is a few hundred bytes (a merge's lists its sources): larger is not tapt's."""

TEXT_FIELDS = ("query_prompt", "document_prompt", "base_model", "base_revision", "stage",
               "backend", "loss", "objective")
FLAG_FIELDS = ("needs_remote_code", "append_eos")


class PresetRecordError(ValueError):
    """A ``tapt_preset.json`` that is not a record tapt wrote; the message names the file
    and the field."""


def read_preset_record(name_or_path: str) -> dict[str, Any] | None:
    """The checked record in a local model folder (``package:`` paths resolved), or None
    when there is none; :class:`PresetRecordError` when the file is not one tapt wrote."""
    try:
        folder = Path(resolve_model_path(name_or_path))
    except FileNotFoundError:
        return None
    path = folder / RECORD_FILE
    if name_or_path.startswith(PACKAGE_SCHEME) or not path.exists():
        return None
    return check_preset_record(path, _read_object(path))


def _read_object(path: Path) -> Any:
    if path.is_file() and path.stat().st_size > MAX_RECORD_BYTES:
        raise PresetRecordError(f"{path}: {path.stat().st_size:,} bytes, larger than any "
                                "record tapt writes")
    try:
        return read_json(path, error=PresetRecordError)
    except FileNotFoundError:  # removed since read_preset_record saw it
        raise PresetRecordError(f"{path}: vanished while being read") from None


def check_preset_record(path: Path, record: Any) -> dict[str, Any]:
    """``record`` if every field a loader reads has the type tapt writes (extra fields,
    such as a merge's sources, pass unread); else :class:`PresetRecordError` naming
    ``path`` and the field. A loader then never turns remote code on from a string, pools
    by a mode sentence-transformers lacks, or truncates at a length that is no length."""
    def bad(field: str, expected: str) -> PresetRecordError:
        return PresetRecordError(f"{path}: field '{field}': expected {expected}, got "
                                 f"{record[field]!r}")

    if not isinstance(record, dict):
        raise PresetRecordError(f"{path}: not a JSON object (a tapt preset record is one)")
    family = record.get("family")
    if family is not None and not (isinstance(family, str) and FAMILY_NAME.fullmatch(family)):
        raise bad("family", "a family name")
    pooling = record.get("pooling")
    modes = pooling if isinstance(pooling, list) else [pooling]  # several modes: a list
    if pooling is not None and not (modes and all(isinstance(mode, str) and mode in
                                                  POOLING_MODES for mode in modes)):
        raise bad("pooling", f"null, or one or a list of {', '.join(POOLING_MODES)}")
    length = record.get("max_seq_length")
    if length is not None and (isinstance(length, bool) or not isinstance(length, int)
                               or length < 1):
        raise bad("max_seq_length", "null or a positive whole number")
    for field in TEXT_FIELDS:
        if record.get(field) is not None and not isinstance(record[field], str):
            raise bad(field, "null or text")
    for field in FLAG_FIELDS:
        if field in record and not isinstance(record[field], bool):
            raise bad(field, "true or false")
    return record


def portable_model_name(name: str, revision: str | None = None) -> tuple[str, str | None]:
    """``(name, revision)`` as a record keeps them (see the module docstring): a local
    folder becomes its folder's name (revision None), or ``OWNER/NAME`` and the commit when
    it is a Hub cache snapshot (``.../models--OWNER--NAME/snapshots/COMMIT``)."""
    if name.startswith(PACKAGE_SCHEME):
        return name, None
    path = Path(name)
    if not path.exists() and is_hub_id(name, namespace=False):
        return name, revision
    parts = path.resolve().parts if path.exists() else path.parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3][len("models--"):].replace("--", "/"), parts[-1]
    return (parts[-1] if parts else name), None


def base_model_of(name_or_path: str) -> str:
    """The first model of a chain of tapt runs: a Hub id, ``package:...`` or a local
    folder's name (:func:`portable_model_name`)."""
    return base_of(name_or_path)[0]


_HINTS_WARNED: set[tuple[str, str]] = set()
"""(problem, fallback) pairs :func:`read_record_hint` has warned of in this process."""


def base_model_id(name: str) -> str | None:
    """The Hub id of the model ``name`` (a recipe's ``model.name``, a source model) started
    from, through any chain of tapt runs (``tapt_preset.json`` records it), or None when
    that first model is a ``package:`` or a local folder: the ``base_model`` of every card
    tapt writes."""
    try:
        base = base_model_of(name)
    except (OSError, ValueError):  # an unreadable record: no claim about the base
        return None
    if base.startswith(PACKAGE_SCHEME) or Path(base).exists() or not is_hub_id(base):
        return None
    return base


def read_record_hint(name_or_path: str, fallback: str) -> dict[str, Any] | None:
    """The checked record where it is only a hint (what to label a result, which backend
    to expect, the base model to name): a bad one is logged as a warning that says what
    happens instead (``fallback``) and counts as none, so the caller goes on without it.
    The same problem with the same fallback is warned of once per process (a table reads
    one model's record for each of its result files); later reads log it at debug level."""
    try:
        return read_preset_record(name_or_path)
    except (OSError, ValueError) as err:  # PresetRecordError, or a path that cannot resolve
        said = (str(err), fallback)
        level = logging.DEBUG if said in _HINTS_WARNED else logging.WARNING
        _HINTS_WARNED.add(said)
        logger.log(level, "%s; %s", err, fallback)
        return None


def base_of(name_or_path: str, revision: str | None = None) -> tuple[str, str | None]:
    """``(base model, its revision)`` of a chain of tapt runs starting at ``name_or_path``
    (loaded at ``revision``), as :func:`portable_model_name` records them."""
    # at the end of a run: the export must not fail on a bad record
    record = read_record_hint(name_or_path, f"the base model is recorded as {name_or_path} "
                                            "itself")
    if record and record.get("base_model"):
        return portable_model_name(record["base_model"], record.get("base_revision"))
    return portable_model_name(name_or_path, revision)


def write_preset_record(folder: Path, model, spec, stage: str, **extra: Any) -> dict:
    """Record how ``model`` (a configured SentenceTransformer loaded from ``spec``) is used."""
    from sentence_transformers.sentence_transformer.modules import Pooling

    preset = spec.preset()
    pooling = next((m.pooling_mode for m in model if isinstance(m, Pooling)), None)
    base, base_revision = base_of(spec.name_or_path, spec.revision)
    record = {"family": preset.name, "pooling": pooling,
              "query_prompt": model.prompts.get("query", ""),
              "document_prompt": model.prompts.get("document", ""),
              "max_seq_length": model.max_seq_length, "append_eos": preset.append_eos,
              "needs_remote_code": preset.needs_remote_code,
              "base_model": base, "base_revision": base_revision, "stage": stage, **extra}
    atomic_write_json(folder / RECORD_FILE, record)
    return record
