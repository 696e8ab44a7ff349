"""DAPT: domain-adaptive (continued) pretraining of an encoder on passages, before TAPT.

Phases, as in :mod:`tapt.training.contrastive` (and with its run folder, resume, tracking,
non-finite guard, retrieval evaluator, ``results.json``, export and Hub push):
check (recipe, output folder, passages) -> set up (model, objective, sequences) -> train
(held-out loss at every save, and the zero-shot dev retrieval metrics of the encoder as it
is) -> export.

Objectives:

- ``mlm`` (:mod:`~tapt.training.dapt.mlm`): masked language modelling with transformers'
  ``Trainer`` and ``DataCollatorForLanguageModeling`` (15% masking, optional whole-word
  masking) on the model's ``AutoModelForMaskedLM`` (its MLM head loaded when the checkpoint
  has one, initialised otherwise). The encoder weights are copied into the
  SentenceTransformer (the family's pooling and prompts) for each retrieval evaluation and
  for the export. The held-out passages are masked once with a fixed seed, so their loss
  (and perplexity) is comparable across saves.
- ``simcse`` (:mod:`~tapt.training.dapt.simcse`): unsupervised SimCSE through
  sentence-transformers: each passage window against itself under dropout noise, in-batch
  negatives (MultipleNegativesRankingLoss), for any model (Qwen3 too: its missing dropout is
  supplied while training).

The export (``OUTPUT/final``, :mod:`~tapt.training.dapt.dapt_export`) is a SentenceTransformer
folder that ``tapt train`` starts from (``model.name: OUTPUT/final``); ``tapt_preset.json``
keeps the base model's family preset so the TAPT run pools and prompts as the base model did.

Example::

    from tapt.recipe import load_recipe
    from tapt.training.dapt import dapt

    result = dapt(load_recipe("recipes/dapt-quickstart.yaml", kind="dapt"))
    result.history[-1]["heldout_loss"]
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from transformers import set_seed

from tapt.cards.run_card import dapt_card_section
from tapt.encoders.loading import ModelSpec, load_sentence_transformer
from tapt.hub.push import check_run_push, push_run_export
from tapt.recipe import DaptRecipe
from tapt.run_folder.records import (
    FINISHED,
    DaptFacts,
    NonFiniteRecord,
    RunResults,
    read_history,
    write_results,
)
from tapt.run_folder.start import RunStart, open_run_dir
from tapt.training.arguments import training_bf16
from tapt.training.dapt.dapt_export import export_dapt
from tapt.training.dapt.dapt_inputs import (
    DEFAULT_MAX_LENGTH,
    DaptInputs,
    check_objective,
    dev_evaluator,
    prepare_dapt_inputs,
    retrieval_data,
    sequence_length,
    window_overlap,
)
from tapt.training.dapt.mlm import (
    WHOLE_WORD_REPLACEMENT,
    BatchSeededMasking,
    MaskedOrPadded,
    copy_encoder,
    fixed_masks,
    mlm_model,
    mlm_trainer,
    pad_offsets,
    transformer_folder,
)
from tapt.training.dapt.recorder import DaptRecorder
from tapt.training.dapt.simcse import restore_dropout, set_dropout, simcse_trainer
from tapt.training.export import export_staging
from tapt.training.nonfinite import NonFiniteGuard, check_exportable
from tapt.training.tracking import check_wandb, finish_wandb
from tapt.training.trainer import run_trainer
from tapt.util.files import publish
from tapt.util.process_group import is_main_process

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "WHOLE_WORD_REPLACEMENT",
    "BatchSeededMasking",
    "DaptInputs",
    "DaptRecorder",
    "DaptResult",
    "MaskedOrPadded",
    "check_objective",
    "copy_encoder",
    "dapt",
    "dapt_card_section",
    "dapt_in",
    "dev_evaluator",
    "export_dapt",
    "fixed_masks",
    "mlm_model",
    "mlm_trainer",
    "pad_offsets",
    "prepare_dapt_inputs",
    "restore_dropout",
    "retrieval_data",
    "sequence_length",
    "set_dropout",
    "simcse_trainer",
    "transformer_folder",
    "window_overlap",
]


@dataclass
class DaptResult:
    """Where the run is and what it measured (one history entry per evaluation)."""

    run_dir: Path
    final_dir: Path | None
    history: list[dict] = field(default_factory=list)


def dapt(recipe: DaptRecipe, *, callbacks: list | None = None,
         overwrite: bool = False) -> DaptResult:
    """Run a DAPT recipe end to end; see the module docstring for the phases.

    Raises:
        NonFiniteTrainingError: a NaN/inf loss or gradient and ``on_nonfinite: stop``.
        TrainingInterrupted: Ctrl-C while training (a ``KeyboardInterrupt`` naming the
            last complete checkpoint).
    """
    # 1. Check everything cheap before anything heavy (the run folder is locked).
    check_run_push(recipe.hub)
    check_wandb(recipe.tracking.backend)  # credentials, before data and model load
    with open_run_dir(recipe, overwrite=overwrite) as start:
        return dapt_in(start, recipe, callbacks=callbacks)


def dapt_in(start: RunStart, recipe: DaptRecipe, *, callbacks: list | None = None
            ) -> DaptResult:
    """The phases of :func:`dapt` after the run folder was checked and locked."""
    # 2. Inputs (tapt.training.dapt.dapt_inputs), then the model and the objective's needs;
    # whatever fails here leaves the run folder as it was.
    inputs = prepare_dapt_inputs(recipe)
    train_texts, held_out = inputs.train_texts, inputs.held_out
    set_seed(recipe.training.seed)
    spec = ModelSpec.from_settings(recipe.model)
    model = load_sentence_transformer(spec)
    evaluator = dev_evaluator(recipe, inputs.eval_data)
    nonfinite_guard = NonFiniteGuard(recipe.training.on_nonfinite,
                                     recipe.training.max_nonfinite_steps, evaluator=evaluator)
    max_length = sequence_length(recipe, model)
    check_objective(recipe, model, max_length)

    # 3. The run's first write (recipe.yaml), then the objective's trainer.
    run, resume_from = start.begin(recipe)
    logger.info("DAPT (%s): %d training and %d held-out passages, sequences of %d tokens",
                recipe.objective.name, len(train_texts), len(held_out), max_length)
    build = mlm_trainer if recipe.objective.name == "mlm" else simcse_trainer
    trainer, finish = build(recipe, run, model, train_texts, held_out, max_length, evaluator,
                            nonfinite_guard, callbacks, resume_from is not None)

    # 4. Train.
    run_trainer(trainer, run, resume_from)
    finish()

    # 5. Export the encoder as it ended (DAPT keeps no "best" checkpoint).
    check_exportable(model, evaluator, None)
    history = read_history(run)
    result = DaptResult(run_dir=run.root, final_dir=None, history=history)
    if not is_main_process():
        return result
    staging = export_staging(model, run, recipe.export.dtype)
    export_dapt(model, spec, staging, recipe, history)
    write_results(run, RunResults(
        status=FINISHED,
        dapt=DaptFacts(objective=recipe.objective.name, sequence_length=max_length,
                       training_passages=len(train_texts), held_out_passages=len(held_out)),
        training_bf16=training_bf16(recipe.training.bf16)[0],
        nonfinite=NonFiniteRecord(nonfinite_guard.skipped, nonfinite_guard.records()),
        history=history))
    result.final_dir = publish(staging, run.final)
    if recipe.tracking.backend == "wandb":
        finish_wandb()
    push_run_export(run.final, recipe.hub, run_name=Path(recipe.output_dir).name,
                    trust_remote_code=recipe.model.trust_remote_code)
    return result
