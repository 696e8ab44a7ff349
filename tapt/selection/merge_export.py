"""Write a merged model (:mod:`tapt.selection.merge`) as a tapt export.

The folder is what ``tapt train`` exports, so ``SentenceTransformer(folder)``, ``tapt
eval``, ``tapt push`` and ``tapt train`` (``model.name: folder``) take it: safetensors
weights, tokenizer and prompts (the first model's), ``LICENSE`` (Apache-2.0),
``tapt_preset.json`` (``stage: merge``, the sources and weights), ``merge.json`` (sources,
weights, formula, the dev grid when one was evaluated, and ``files``: every entry the
export holds) and a model card naming the sources and weights. Sources are named as :func:`tapt.encoders.preset_record.portable_model_name`
records them (a local folder by its name, a Hub cache snapshot as its Hub id and commit),
so a published card carries no path of this machine.

The export is written into a staging folder and renamed into place when whole; with
``overwrite`` an existing merge is replaced only then, and only when its records read back
checked and it holds nothing ``merge.json`` does not list (:mod:`tapt.util.folder_replace`,
:data:`MERGE_RECORD`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tapt.cards.common import apache_license_text
from tapt.cards.merge_card import base_models, merge_card
from tapt.encoders.model_paths import resolve_model_path
from tapt.encoders.preset_record import (
    PresetRecordError,
    portable_model_name,
    read_preset_record,
    write_preset_record,
)
from tapt.selection.merge_types import DevSelection
from tapt.training.export import cast_saved_weights
from tapt.training.weights import MergeError
from tapt.util.files import (
    atomic_write_json,
    atomic_write_text,
    ensure_free_space,
    parameter_bytes,
    staging_folder,
)
from tapt.util.folder_replace import FolderRecord, check_replaceable, replace_folder
from tapt.util.json_file import read_json
from tapt.util.outputs import OutputOnInputError, check_apart

MERGE_FILE = "merge.json"
FORMULA = "merged[key] = sum_i weights[i] * tensor_i[key] (float64 accumulation, in the " \
          "models' order, stored in the sources' dtype); integer/bool tensors copied"


def listed_entries(folder: Path, stage: str, record_file: str) -> list[str]:
    """What an export of ``stage`` (merge, combine) holds by its records:
    ``tapt_preset.json`` read back checked with that ``stage``
    (:func:`read_preset_record`), and ``record_file`` a JSON object whose ``files`` lists
    the folder's entries by name. Raises ``ValueError`` naming the file and what is
    wrong."""
    record = read_preset_record(str(folder))  # PresetRecordError when it is not tapt's
    if record is None or record.get("stage") != stage:
        raise PresetRecordError(f"{folder / 'tapt_preset.json'}: missing, or its stage is "
                                f"not {stage}")
    path = folder / record_file
    body = read_json(path)
    listed = body.get("files") if isinstance(body, dict) else None
    if not isinstance(listed, list) or not all(
            isinstance(name, str) and name and Path(name).name == name for name in listed):
        raise ValueError(f"{path}: field 'files': expected the list of the export's entries "
                         "(tapt writes it)")
    return listed


def merge_entries(folder: Path) -> list[str]:
    """What a merge export holds by its records (:func:`listed_entries`, ``merge.json``)."""
    return listed_entries(folder, "merge", MERGE_FILE)


MERGE_RECORD = FolderRecord("tapt merge", MERGE_FILE, merge_entries)
"""What ``--overwrite`` may replace: a merge or soup export, by its checked records."""


def check_merge_output(output: Path, sources: Sequence[str], *, overwrite: bool,
                       inputs: Sequence[tuple[str, str | os.PathLike | None]] = (),
                       record: FolderRecord | None = None, made: str = "merge") -> None:
    """Refuse, before anything loads, an ``--output`` that is, holds or lies inside a source
    model or another input (``inputs``: the dev and guard data), ``--overwrite`` or not
    (:func:`tapt.util.outputs.check_apart`), a symbolic link, or that exists (unless
    ``overwrite``, and then only a folder of ``record``'s kind that holds nothing else:
    :data:`MERGE_RECORD` by default; ``made`` names the result in the refusal).
    Whether it can be written is the command line's check (with its other
    options)."""
    output = Path(output)
    models = []
    for source in sources:
        try:
            models.append(("source model", resolve_model_path(source)))
        except (FileNotFoundError, ValueError):  # a missing package: loading names it
            continue
    try:
        check_apart([("--output", output)], [*models, *inputs])
    except OutputOnInputError as err:
        raise MergeError(f"{err}; write the {made} to another folder") from None
    check_replaceable(output, overwrite=overwrite, error=MergeError,
                      record=record or MERGE_RECORD)


def source_records(specs: Sequence, weights: Sequence[float]) -> list[dict]:
    """One ``{model, revision, weight}`` per source, the model named portably."""
    records = []
    for spec, weight in zip(specs, weights):
        name, revision = portable_model_name(spec.name_or_path, spec.revision)
        records.append({"model": name, "revision": revision, "weight": weight})
    return records


def export_merge(model, output: Path, *, spec, sources: Sequence, weights: Sequence[float],
                 selection: DevSelection | None = None, overwrite: bool = False,
                 dtype: str = "float32", soup: dict | None = None) -> Path:
    """Write the merged ``model`` (loaded from ``spec``'s architecture, the first source)
    to ``output``, staged and renamed into place; returns ``output``. ``soup``: the record
    of a model soup (:class:`tapt.selection.soup.SoupResult`), kept in ``merge.json`` and
    the card."""
    output = Path(output)
    ensure_free_space(output.parent, parameter_bytes(model, 4 if dtype == "float32" else 2),
                      "the merged model")
    records = source_records(sources, weights)
    staging = staging_folder(output)
    staging.mkdir(parents=True)
    model.save(str(staging), create_model_card=False, safe_serialization=True)
    if dtype != "float32":
        cast_saved_weights(staging, dtype)
    (staging / "LICENSE").write_text(apache_license_text(), encoding="utf-8")
    write_preset_record(staging, model, spec, stage="merge", sources=records,
                        weights=list(weights))
    entries = sorted({*(path.name for path in staging.iterdir()), MERGE_FILE})
    atomic_write_json(staging / MERGE_FILE, {
        "sources": records, "weights": list(weights), "formula": FORMULA, "dtype": dtype,
        "pick_on_dev": selection.to_dict() if selection is not None else None,
        **({"soup": soup} if soup is not None else {}), "files": entries})
    atomic_write_text(staging / "README.md", merge_card(records, selection,
                                                        base_models(sources), soup))
    return replace_folder(staging, output, overwrite=overwrite, record=MERGE_RECORD,
                          error=MergeError)
