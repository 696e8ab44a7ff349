"""Training's shared steps, used by the TAPT (:mod:`tapt.training.contrastive`) and DAPT
(:mod:`tapt.training.dapt`) recipes: the model spec, the Hub check before and the push
after, the trainer run (Ctrl-C and non-finite stops), ``results.json``, the evaluation
history, the export's staging folder and the checks before exporting.

Each step is one call; the recipes run them in the same order: check -> train -> export.
"""

from __future__ import annotations

import logging
from pathlib import Path

from tapt.encoders.loading import ModelSpec
from tapt.hub import push_export
from tapt.hub.push import check_environment
from tapt.recipe import DaptRecipe, Recipe
from tapt.run_folder.layout import RunDir
from tapt.run_folder.records import read_history, write_results
from tapt.training.errors import TrainingInterrupted
from tapt.util.files import ensure_free_space, parameter_bytes, staging_folder
from tapt.util.process_group import close_at_exit, is_main_process

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
