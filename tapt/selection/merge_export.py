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

from tapt.encoders.model_paths import resolve_model_path
from tapt.encoders.preset_record import (
    PresetRecordError,
    portable_model_name,
    read_preset_record,
    write_preset_record,
)
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.selection.merge_types import DevSelection
from tapt.training.export import (
    HOW_TO_LOAD,
    LICENSE_ID,
    METRIC_NAMES,
    apache_license_text,
    base_model_id,
    cast_saved_weights,
)
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


def merge_entries(folder: Path) -> list[str]:
    """What a merge export holds by its records: ``tapt_preset.json`` read back checked
    with ``stage: merge`` (:func:`read_preset_record`), and ``merge.json`` a JSON object
    whose ``files`` lists the folder's entries by name. Raises ``ValueError`` naming the
    file and what is wrong."""
    record = read_preset_record(str(folder))  # PresetRecordError when it is not tapt's
    if record is None or record.get("stage") != "merge":
        raise PresetRecordError(f"{folder / 'tapt_preset.json'}: missing, or its stage is "
                                "not merge")
    path = folder / MERGE_FILE
    body = read_json(path)
    listed = body.get("files") if isinstance(body, dict) else None
    if not isinstance(listed, list) or not all(
            isinstance(name, str) and name and Path(name).name == name for name in listed):
        raise ValueError(f"{path}: field 'files': expected the list of the export's entries "
                         "(tapt writes it)")
    return listed


MERGE_RECORD = FolderRecord("tapt merge", MERGE_FILE, merge_entries)
"""What ``--overwrite`` may replace: a merge or soup export, by its checked records."""


def check_merge_output(output: Path, sources: Sequence[str], *, overwrite: bool,
                       inputs: Sequence[tuple[str, str | os.PathLike | None]] = ()) -> None:
    """Refuse, before anything loads, an ``--output`` that is, holds or lies inside a source
    model or another input (``inputs``: the dev and guard data), ``--overwrite`` or not
    (:func:`tapt.util.outputs.check_apart`), a symbolic link, or that exists (unless
    ``overwrite``, and then only a merge that holds nothing else: :data:`MERGE_RECORD`).
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
        raise MergeError(f"{err}; write the merge to another folder") from None
    check_replaceable(output, overwrite=overwrite, error=MergeError, record=MERGE_RECORD)


def source_records(specs: Sequence, weights: Sequence[float]) -> list[dict]:
    """One ``{model, revision, weight}`` per source, the model named portably."""
    records = []
    for spec, weight in zip(specs, weights):
        name, revision = portable_model_name(spec.name_or_path, spec.revision)
        records.append({"model": name, "revision": revision, "weight": weight})
    return records


def base_models(specs: Sequence) -> list[str]:
    """The Hub ids the sources' tapt chains started from (none for local models)."""
    return list(dict.fromkeys(base for spec in specs
                              if (base := base_model_id(spec.name_or_path)) is not None))


def merge_card(records: list[dict], selection: DevSelection | None,
               base: list[str], soup: dict | None = None) -> str:
    """The model card: front matter (license, library, base models, a ``model-index`` with
    the picked weight's dev metrics) and the sources, weights and dev grid."""
    from huggingface_hub import EvalResult, ModelCardData

    names = [record["model"] for record in records]
    title = "tapt merge of " + ", ".join(names)
    results = None
    if selection is not None:
        picked = next(p for p in selection.points if p.weight == selection.picked)
        data = selection.info.get("data") or "dev data"
        results = [EvalResult(task_type="information-retrieval",
                              task_name="Information Retrieval", dataset_type=data,
                              dataset_name=f"{data} {selection.info.get('split', 'dev')}",
                              dataset_split=selection.info.get("split", "dev"),
                              metric_type=key, metric_name=METRIC_NAMES.get(key, key),
                              metric_value=picked.metrics[key]) for key in METRIC_KEYS]
    card = ModelCardData(license=LICENSE_ID, library_name="sentence-transformers",
                         pipeline_tag="sentence-similarity", model_name=title,
                         tags=["sentence-transformers", "sentence-similarity", "tapt",
                               "merge"], base_model=base or None, eval_results=results)
    if len(base) > 1:
        card.base_model_relation = "merge"
    intro = ("A weighted average of models of the same architecture, made with `tapt merge`: "
             "every floating-point tensor is the weighted sum of the sources' tensors "
             "(accumulated in float64), integer and boolean tensors are copied. Tokenizer, "
             "pooling, prompts and maximum length are the first model's.")
    lines = ["---", card.to_yaml(), "---", "", f"# {title}", "", intro, "",
             "| model | revision | weight |", "|---|---|---:|"]
    lines += [f"| `{r['model']}` | {r['revision'] or '-'} | {r['weight']:g} |"
              for r in records]
    if selection is not None:
        info = selection.info
        how = (f"Each weight of `{names[0]}` (the other model gets 1 - w) was evaluated on "
               f"`{info.get('data')}` {info.get('split', 'dev')} "
               f"({info.get('corpus_size', '?')} passages, {info.get('num_queries', '?')} "
               f"queries); the best `{selection.metric}` was kept (ties: the larger weight "
               "on the first model).")
        guarded = "guard_data" in info
        if guarded:
            how += (f" Only weights whose `{selection.metric}` on the guard set "
                    f"`{info['guard_data']}` {info.get('guard_split')} was at least the second "
                    f"model's (w = 0) minus {info.get('guard_tolerance'):g} were eligible.")
        guard_column = [f"guard {selection.metric}"] if guarded else []
        lines += ["", "### Weights picked on dev", "", how, "",
                  f"| weight of `{names[0]}` | " + " | ".join([*METRIC_KEYS, *guard_column])
                  + " | |", "|---:|" + "---:|" * (len(METRIC_KEYS) + len(guard_column)) + "---|"]
        lines += [f"| {p.weight:g} | " + " | ".join(
                      [f"{p.metrics[k]:.4f}" for k in METRIC_KEYS]
                      + ([f"{p.guard[selection.metric]:.4f}"] if guarded else []))
                  + (" | picked |" if p.weight == selection.picked else " | |")
                  for p in selection.points]
    if soup is not None:
        lines += ["", *soup_card_lines(soup)]
    lines += ["", HOW_TO_LOAD]
    return "\n".join(lines)


def soup_card_lines(soup: dict) -> list[str]:
    """The card's section on a model soup (:mod:`tapt.selection.soup`)."""
    metric = next(iter(soup["dev"]), "binary_ndcg@10")
    how = ("A **uniform soup**: the mean of every ingredient (Wortsman et al., 2022)."
           if soup["method"] == "uniform" else
           "A **greedy soup** (Wortsman et al., 2022, Algorithm 1): the runs sorted by their "
           "own best dev metric, each added if the mean with it scored at least as well on "
           "dev as without it.")
    lines = ["### Soup", "", how, "", (f"Dev {metric} of the exported soup: "
             f"{soup['dev'][metric]:.4f}.")]
    if soup["steps"]:
        lines += ["", f"| step | run tried | dev {metric} | kept |", "|---:|---|---:|---|"]
        lines += [f"| {i} | `{Path(step['ingredient']).name}` | {step['dev'][metric]:.4f} | "
                  f"{'yes' if step['kept'] else 'no'} |"
                  for i, step in enumerate(soup["steps"], start=1)]
    return lines


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
