"""tapt's subclass of sentence-transformers' trainer: what the stock trainer does not do.

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

from tapt.run_folder.layout import mark_complete
from tapt.training.export import drop_data_samples, redact_card
from tapt.training.log_lines import use_log_lines
from tapt.training.lora import has_lora, load_lora_checkpoint
from tapt.training.nonfinite import QUERY_IDS_KEY, NonFiniteGuard
from tapt.training.tracking import start_wandb
from tapt.util.files import ensure_free_space, parameter_bytes


class GuardedTrainerMixin:
    """Feed every micro-batch's loss to a :class:`NonFiniteGuard` and log its count; for
    any transformers ``Trainer`` subclass (``guard=`` is taken by the constructor)."""

    def __init__(self, *args, guard: NonFiniteGuard | None = None, **kwargs) -> None:
        self.guard = guard or NonFiniteGuard()
        callbacks = [*(kwargs.pop("callbacks", None) or []), self.guard]
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
        self.guard.observe_loss(loss, query_ids)
        return loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:
            logs["nonfinite_steps"] = self.guard.skipped
        super().log(logs, start_time)

    def _save_checkpoint(self, model, trial) -> None:
        """Check the free space first; mark the checkpoint complete once every file is
        written, and only then delete older checkpoints (a crash mid-save leaves the
        previous complete checkpoint to resume from)."""
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
