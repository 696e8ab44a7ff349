"""Training's shared steps, used by the TAPT (:mod:`tapt.training.contrastive`) and DAPT
(:mod:`tapt.training.dapt`) recipes: the model spec, the Hub check before and the push
after, the trainer run (Ctrl-C and non-finite stops), ``results.json``, the evaluation
history, the export's staging folder and the checks before exporting.

Each step is one call; the recipes run them in the same order: check -> train -> export.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from tapt.data.beir import DataError
from tapt.encoders.loading import ModelSpec
from tapt.hub import push_export
from tapt.hub.push import check_environment
from tapt.recipe import DaptRecipe, Recipe
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.training.distributed import is_main_process
from tapt.training.errors import TrainingInterrupted
from tapt.training.run_dir import RunDir
from tapt.util.files import atomic_write_json, ensure_free_space, parameter_bytes, staging_folder
from tapt.util.finite import metric_value
from tapt.util.process_group import close_at_exit
from tapt.util.provenance import provenance

logger = logging.getLogger(__name__)


def model_spec(recipe: Recipe | DaptRecipe) -> ModelSpec:
    """The recipe's ``model`` section as the spec that loads the SentenceTransformer."""
    settings = recipe.model
    return ModelSpec(settings.name, family=settings.family,
                     max_seq_length=settings.max_seq_length, pooling=settings.pooling,
                     query_prompt=settings.query_prompt, document_prompt=settings.document_prompt,
                     trust_remote_code=settings.trust_remote_code, revision=settings.revision)


def check_hub(recipe) -> None:
    """Before training: a recipe that pushes at the end needs a valid repo id and a token."""
    if recipe.hub.repo_id:
        check_environment(recipe.hub.repo_id, dry_run=False)


def export_staging(model, run: RunDir, recipe) -> Path:
    """The staging folder of ``final/``, after checking there is room for the export."""
    bytes_per_value = 4 if recipe.export.dtype == "float32" else 2
    ensure_free_space(run.root, parameter_bytes(model, bytes_per_value), "the export")
    return staging_folder(run.final)


def check_exportable(model, evaluator, best_step: int | None, *,
                     weights: str = "the trained weights") -> None:
    """Refuse to export weights that are not finite, or a run none of whose checkpoints
    had a finite dev evaluation (the trainer would hand back the last weights);
    ``evaluator`` may be None (no dev evaluation); ``weights`` names them in the error."""
    import torch

    from tapt.training.nonfinite import NonFiniteTrainingError

    broken = [name for name, p in model.named_parameters() if not torch.isfinite(p).all()]
    if broken:
        raise NonFiniteTrainingError(
            f"{weights} hold NaN/inf ({len(broken)} tensors, e.g. {broken[0]}); "
            "nothing is exported", [])
    if evaluator is None:
        return
    checkpoint_evals = [entry for entry in evaluator.history if entry["step"] > 0]
    if best_step is None and evaluator.refusals and \
            all(entry.get("error") for entry in checkpoint_evals):
        raise NonFiniteTrainingError(
            "no checkpoint had a finite dev evaluation (every one was refused for non-finite "
            "embeddings); nothing is exported", [])


def run_trainer(trainer, run: RunDir, resume_from: str | None) -> None:
    """``trainer.train``; a non-finite stop is recorded in ``results.json`` and re-raised,
    Ctrl-C becomes :class:`~tapt.training.errors.TrainingInterrupted` (the last checkpoint)."""
    from tapt.training.nonfinite import NonFiniteTrainingError

    close_at_exit()  # under torchrun, also when train() is called from Python
    try:
        trainer.train(resume_from_checkpoint=resume_from)
    except KeyboardInterrupt:
        raise TrainingInterrupted(run.root, run.last_checkpoint()) from None
    except NonFiniteTrainingError as err:
        if is_main_process():
            write_results(run, {"status": "stopped: non-finite", "error": str(err),
                                "nonfinite_events": err.events,
                                "last_checkpoint": run.last_checkpoint(),
                                "history": read_history(run)})
        raise


def write_results(run: RunDir, results: dict) -> None:
    """``results.json``, written whole or not at all, secrets redacted, with its
    :func:`~tapt.util.provenance.provenance` (versions, date, command)."""
    atomic_write_json(run.results_file, {**results, "provenance": provenance()})


def read_history(run: RunDir, *, require_metrics: bool = False) -> list[dict]:
    """Dev evaluations from ``metrics.jsonl``, each checked; a resumed run keeps the last
    entry per step. ``require_metrics``: every entry that is not a refused (non-finite)
    evaluation carries all of :data:`METRIC_KEYS` (a TAPT run's do)."""
    if not run.metrics_file.is_file():
        return []
    by_step: dict[int, dict] = {}
    text = run.metrics_file.read_text(encoding="utf-8")
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as err:
            if number == len(lines) and not text.endswith("\n"):
                # a crash while appending left half a line: skip it
                logger.warning("%s:%d: incomplete last line skipped", run.metrics_file, number)
                continue
            raise DataError(run.metrics_file, f"not an evaluation record ({err})", number,
                            "step") from None
        problem = history_problem(entry, require_metrics)
        if problem is not None:
            field, message = problem
            raise DataError(run.metrics_file, message, number, field)
        by_step[entry["step"]] = entry
    return [by_step[step] for step in sorted(by_step)]


def history_problem(entry, require_metrics: bool = False) -> tuple[str, str] | None:
    """``(field, what is wrong)`` with one ``metrics.jsonl`` entry, or None: the step a
    whole number >= 0, each metric present (``guard_`` ones too) a finite number in [0, 1]
    unless the entry is a refused evaluation (``error``)."""
    if not isinstance(entry, dict):
        return "step", "not an evaluation record (not a JSON object)"
    step = entry.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        return "step", f"expected a whole number >= 0, got {step!r}"
    if entry.get("error"):
        return None
    keys = [key for key in METRIC_KEYS if key in entry]
    missing = [key for key in METRIC_KEYS if key not in entry]
    if missing and (require_metrics or keys):
        return missing[0], "missing (every dev evaluation records all four metrics)"
    if not entry.get("guard_error"):  # a refused guard evaluation records None
        keys += [f"guard_{key}" for key in METRIC_KEYS if f"guard_{key}" in entry]
    for key in keys:
        value = entry[key]
        if not metric_value(value):
            return key, f"expected a finite number in [0, 1], got {value!r}"
    return None


def best_step_problem(value) -> str | None:
    """What is wrong with ``results.json``'s ``best_step`` (a whole number >= 0, or null
    when no checkpoint was kept), or None."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return None
    return f"expected a whole number >= 0 or null, got {value!r}"


def metrics_row_problem(row: str, metrics) -> tuple[str, str] | None:
    """``(field, what is wrong)`` with ``results.json``'s summary row ``row`` (each of
    :data:`METRIC_KEYS` a finite number in [0, 1]): the field is ``summary.ROW`` or
    ``summary.ROW.METRIC``; None when the row is fine."""
    if not isinstance(metrics, dict):
        return f"summary.{row}", f"expected an object of metrics, got {metrics!r}"
    for key in METRIC_KEYS:
        value = metrics.get(key)
        if not metric_value(value):
            return f"summary.{row}.{key}", f"expected a finite number in [0, 1], got {value!r}"
    return None


def finish_wandb(summary: dict[str, dict[str, float]]) -> None:
    """Put the result table in the W&B run summary and close the run (flushes offline runs)."""
    import wandb

    if wandb.run is None:
        return
    for row, metrics in summary.items():
        for key, value in metrics.items():
            wandb.run.summary[f"{row.replace(' ', '_')}/{key}"] = value
    wandb.finish()


def push_to_hub(recipe, folder: Path) -> None:
    """Push an export as the recipe's ``hub`` section says (call on the main process)."""
    hub = recipe.hub
    if not hub.repo_id:
        return

    push_export(folder, hub.repo_id, private=hub.private, revision=hub.revision,
                commit_message=hub.commit_message or f"tapt: {Path(recipe.output_dir).name}",
                license=hub.license, trust_remote_code=recipe.model.trust_remote_code)
