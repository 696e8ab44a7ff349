"""tapt's subclass of sentence-transformers' trainer: what the stock trainer does not do,
and the train phase's one call, :func:`run_trainer` (TAPT and DAPT alike).

- every micro-batch's loss goes to the :class:`~tapt.training.nonfinite.NonFiniteGuard`
  (with the batch's query ids), and ``nonfinite_steps`` is logged;
- under DDP the evaluator runs on every rank, which encodes its share with tapt's fast
  path (the stock trainer runs it on rank 0 and has the other ranks serve ``encode``);
- checkpoints are marked complete once whole, older ones deleted only after that, and
  the free space is checked before each save;
- a best checkpoint that cannot be loaded is an error (the stock trainer logs it and goes
  on with the last weights, which would then be exported as "best");
- LoRA adapters are reloaded from checkpoints (resume and best model);
- no secret reaches a checkpoint or W&B: the W&B run is started redacted
  (:mod:`tapt.training.tracking`), each checkpoint's model card is redacted before the
  checkpoint is marked complete, and the cards carry no samples of the training data.
"""

from __future__ import annotations

from pathlib import Path

from sentence_transformers import SentenceTransformerTrainer
from transformers import Trainer
from transformers.trainer_utils import rotate_checkpoints

from tapt.cards.run_card import drop_data_samples, redact_card
from tapt.run_folder.layout import RunDir, mark_complete
from tapt.run_folder.records import (
    STOPPED_NONFINITE,
    NonFiniteStop,
    RunResults,
    read_history,
    write_results,
)
from tapt.training.errors import NonFiniteTrainingError, TrainingInterrupted
from tapt.training.log_lines import use_log_lines
from tapt.training.lora import has_lora, load_lora_checkpoint
from tapt.training.nonfinite import QUERY_IDS_KEY, NonFiniteGuard
from tapt.training.tracking import start_wandb
from tapt.util.files import ensure_free_space, parameter_bytes
from tapt.util.process_group import close_at_exit, is_main_process


class GuardedTrainerMixin:
    """Feed every micro-batch's loss to a :class:`NonFiniteGuard` and log its count; for
    any transformers ``Trainer`` subclass (``nonfinite_guard=`` is taken by the
    constructor)."""

    def __init__(self, *args, nonfinite_guard: NonFiniteGuard | None = None, **kwargs) -> None:
        self.nonfinite_guard = nonfinite_guard or NonFiniteGuard()
        callbacks = [*(kwargs.pop("callbacks", None) or []), self.nonfinite_guard]
        super().__init__(*args, callbacks=callbacks, **kwargs)

        use_log_lines(self)  # tapt's log lines, not the Trainer's printed dicts
        card = getattr(self.model, "model_card_data", None)
        if card is not None:  # set from the data while the trainer was made
            drop_data_samples(card)

    def train(self, *args, **kwargs):
        start_wandb(self.args, main_process=self.is_world_process_zero())
        return super().train(*args, **kwargs)

    def training_step(self, model, inputs, num_items_in_batch=None):
        query_ids = inputs.pop(QUERY_IDS_KEY, None)
        loss = super().training_step(model, inputs, num_items_in_batch)
        self.nonfinite_guard.observe_loss(loss, query_ids)
        return loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:
            logs["nonfinite_steps"] = self.nonfinite_guard.skipped
        super().log(logs, start_time)

    def _save_checkpoint(self, model, trial) -> None:
        """Check the free space first; mark the checkpoint complete once every file is
        written, and only then delete older checkpoints (a crash mid-save leaves the
        previous complete checkpoint to resume from).

        An override of transformers' private method rather than a ``TrainerCallback``:
        ``on_save`` runs after ``_save_checkpoint`` has returned, and transformers deletes
        the checkpoints over ``save_total_limit`` inside it, before any callback could mark
        the new one complete. Keeping the rotation for ``on_save`` would mean running with
        ``save_total_limit=None`` in the arguments (recorded so in ``training_args.bin``
        and W&B, and dropping transformers' end-of-training rule for a limit of 1); and the
        free-space check, which ``on_step_end`` could carry, stays beside the save it
        guards (as of transformers 5.24's ``Trainer._save_checkpoint``).
        """
        run_dir = Path(self._get_output_dir(trial=trial))
        if self.args.should_save:
            trainable = sum(p.numel() * p.element_size() for p in self.model.parameters()
                            if p.requires_grad)
            ensure_free_space(run_dir, parameter_bytes(self.model) + 2 * trainable,
                              "a checkpoint (weights and optimizer state)")
        limit, self.args.save_total_limit = self.args.save_total_limit, None
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = limit
        if self.args.should_save:
            checkpoint = run_dir / f"checkpoint-{self.state.global_step}"
            redact_card(checkpoint / "README.md")  # before the marker records its size
            mark_complete(checkpoint, self.state.global_step)
            rotate_checkpoints(output_dir=str(run_dir), save_total_limit=limit,
                               best_model_checkpoint=self.state.best_model_checkpoint,
                               use_mtime=True)


class GuardedTrainer(GuardedTrainerMixin, Trainer):
    """transformers' ``Trainer`` with the non-finite guard (DAPT's masked-LM training)."""


class TaptTrainer(GuardedTrainerMixin, SentenceTransformerTrainer):
    """``SentenceTransformerTrainer`` with a non-finite guard; see the module docstring."""

    def evaluation_loop(self, dataloader, description, prediction_loss_only=None,
                        ignore_keys=None, metric_key_prefix: str = "eval"):
        evaluator, self.evaluator = self.evaluator, None
        try:
            output = super().evaluation_loop(dataloader, description, prediction_loss_only,
                                             ignore_keys, metric_key_prefix)
        finally:
            self.evaluator = evaluator
        if evaluator is None:
            return output
        # Every rank runs tapt's evaluator; it shards the encoding and broadcasts metrics.
        metrics = evaluator(self.model, output_path=None, epoch=self.state.epoch,
                            steps=self.state.global_step)
        output.metrics.update({key if key.startswith(f"{metric_key_prefix}_")
                               else f"{metric_key_prefix}_{key}": value
                               for key, value in metrics.items()})
        return output

    def _load_best_model(self) -> None:
        checkpoint = self.state.best_model_checkpoint
        if checkpoint:
            mark_best = getattr(self.model.model_card_data, "set_best_model_step", None)
            if mark_best is not None:
                mark_best(int(checkpoint.rsplit("-", 1)[-1]))
            self._load_from_checkpoint(checkpoint)

    def _load_from_checkpoint(self, checkpoint_path: str, model=None) -> None:
        if has_lora(self.model):
            load_lora_checkpoint(self.model, checkpoint_path)
        else:
            super()._load_from_checkpoint(checkpoint_path)


def run_trainer(trainer, run: RunDir, resume_from: str | None) -> None:
    """``trainer.train``; a non-finite stop is recorded in ``results.json`` and re-raised,
    Ctrl-C becomes :class:`~tapt.training.errors.TrainingInterrupted` (the last checkpoint)."""
    close_at_exit()  # under torchrun, also when train() is called from Python
    try:
        trainer.train(resume_from_checkpoint=resume_from)
    except KeyboardInterrupt:
        raise TrainingInterrupted(run.root, run.last_checkpoint()) from None
    except NonFiniteTrainingError as err:
        if is_main_process():
            write_results(run, RunResults(
                status=STOPPED_NONFINITE, error=str(err),
                stop=NonFiniteStop(err.events, run.last_checkpoint()),
                history=read_history(run)))
        raise
