"""``training.average_last: N``: after training, the exported weights are the element-wise
mean of the last N saved checkpoints (a uniform-weight ``tapt merge`` of them).

How it combines with the best checkpoint: the average REPLACES the pick. The best
checkpoint is still chosen on dev and kept (``best_step`` in ``results.json``), the
average is evaluated on dev (and on the guard set, ``eval.guard_data``) beside it, and
``results.json`` (``export``), the summary (``averaged dev``), ``tapt_preset.json`` and
the model card record which checkpoints were averaged with which weights. The average is
exported even when its dev metric is below the best checkpoint's: the choice is the
recipe's, made before training, not a second pick on dev.

With resume the averaged checkpoints are the last N complete ones in
``checkpoints/`` by step, whichever session saved them (the recipe check keeps them:
``save_total_limit >= N + 1``, :func:`tapt.recipe.selection.check_average_last`).

The averaging is :func:`tapt.training.weights.merge_into` (float64 accumulation,
weights 1/N; integer buffers copied); each checkpoint folder is loaded on the CPU with
sentence-transformers' public loader (the model's class on the folder, as ``tapt eval``
loads an export). Under several processes rank 0, which wrote the checkpoints, chooses
them and broadcasts the list (:func:`tapt.retrieval.sharding.broadcast`, which is also the
barrier: no rank reads before rank 0 has chosen); every rank then reads the same folders.
The caller checks the mean is finite (:func:`tapt.training.nonfinite.check_exportable`).

Limits: the N state dicts are held on the CPU at once (N x the float32 model); every rank
reads the checkpoints, so the run folder must be on a filesystem all ranks see.
"""

from __future__ import annotations

from pathlib import Path

from tapt.recipe import RecipeError
from tapt.recipe.selection import saved_checkpoints
from tapt.retrieval.sharding import broadcast
from tapt.run_folder.layout import RunDir, checkpoint_step
from tapt.training.weights import merge_into
from tapt.util.process_group import is_main_process


def check_saves(trainer, count: int) -> None:
    """Refuse a run that saves fewer than ``count`` checkpoints; call it before the zero-shot
    test and training. With ``training.epochs`` the steps follow from the data's size, so
    they are counted as the trainer counts them: ``Trainer.set_initial_training_values`` on
    its train dataloader (the per-process one under DDP; building it draws no random
    numbers: the sampler has its own seeded generator)."""
    args = trainer.args
    max_steps = trainer.set_initial_training_values(args, trainer.get_train_dataloader())[-1]
    saved = saved_checkpoints(max_steps, args.save_steps)
    if saved < count:
        raise RecipeError(
            f"training.average_last ({count}) is more than the {saved} checkpoints this run "
            f"saves ({max_steps} steps, one save every {args.save_steps} and the last); "
            "lower it or train longer")


def last_checkpoints(run: RunDir, count: int) -> list[Path]:
    """The last ``count`` complete checkpoints by step; fewer is an error naming the key."""
    broken = set(run.incomplete_checkpoints())
    folders = [path for path in run.checkpoint_folders() if path not in broken][-count:]
    if len(folders) < count:
        raise RecipeError(
            f"training.average_last ({count}): only {len(folders)} complete checkpoints in "
            f"{run.checkpoints}; nothing was exported (average them with tapt merge)")
    return folders


def chosen_checkpoints(run: RunDir, count: int) -> list[Path]:
    """:func:`last_checkpoints` as rank 0 finds them, on every rank (collective: call on
    every rank); rank 0's error is raised on every rank."""
    chosen = None
    if is_main_process():
        try:
            chosen = {"names": [folder.name for folder in last_checkpoints(run, count)]}
        except RecipeError as err:
            chosen = {"error": str(err)}
    chosen = broadcast(chosen)
    if "error" in chosen:
        raise RecipeError(chosen["error"])
    return [run.checkpoints / name for name in chosen["names"]]


def checkpoint_state(model, folder: Path) -> dict:
    """The state dict of checkpoint ``folder`` of ``model``'s class, loaded on the CPU in
    ``model``'s dtype with sentence-transformers' public loader."""
    model = getattr(model, "_orig_mod", model)  # torch.compile's wrapper
    loaded = type(model)(str(folder), device="cpu",
                         trust_remote_code=getattr(model, "trust_remote_code", False),
                         model_kwargs={"dtype": next(model.parameters()).dtype})
    return {key: tensor.detach() for key, tensor in loaded.state_dict().items()}


def average_last(trainer, run: RunDir, count: int) -> dict:
    """Load the mean of the last ``count`` checkpoints into ``trainer.model`` (call on every
    rank: rank 0 chooses the checkpoints, each rank reads them); returns the record of what
    was averaged. A non-finite mean is loaded too: the caller refuses to export it."""
    folders = chosen_checkpoints(run, count)
    states = [checkpoint_state(trainer.model, folder) for folder in folders]
    weights = [1.0 / count] * count  # count >= 2: the schema's bound (bounds.AVERAGED)
    names = [folder.name for folder in folders]
    merge_into(trainer.model, states, weights, names, finite=False)
    del states
    return {"kind": "average_last", "steps": [checkpoint_step(f) for f in folders],
            "checkpoints": names, "weights": weights}

