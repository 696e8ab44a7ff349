"""Trainer arguments every tapt run shares (TAPT and DAPT): schedule, precision, steps,
checkpoints, logging and tracking, taken from a recipe's ``training``, ``eval`` and
``tracking`` sections."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from tapt.encoders.precision import bf16_label, has_accelerator, training_bf16
from tapt.util.redaction import redact

logger = logging.getLogger(__name__)

__all__ = ["bf16_label", "common_arguments", "has_accelerator", "stderr_is_terminal",
           "training_bf16"]


def common_arguments(recipe, checkpoints: Path, resuming: bool) -> dict[str, Any]:
    """Keyword arguments for ``TrainingArguments`` (or sentence-transformers' subclass)."""
    t = recipe.training
    bf16, why = training_bf16(t.bf16)
    logger.info("training precision: %s (%s)", "bf16 mixed" if bf16 else "float32", why)
    report_to = {"none": "none", "wandb": ["wandb"], "tensorboard": ["tensorboard"]}[
        recipe.tracking.backend]
    return dict(
        output_dir=str(checkpoints),
        num_train_epochs=t.epochs,
        max_steps=t.max_steps,
        learning_rate=t.learning_rate,
        lr_scheduler_type=t.scheduler,
        warmup_steps=t.warmup_ratio,  # transformers 5: a float below 1 is a ratio
        weight_decay=t.weight_decay,
        per_device_train_batch_size=t.per_device_batch_size,
        per_device_eval_batch_size=recipe.eval.batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps,
        bf16=bf16,
        seed=t.seed,
        data_seed=t.seed,
        eval_strategy="steps",
        eval_steps=t.eval_steps,
        eval_on_start=recipe.eval.zero_shot and not resuming,
        save_strategy="steps",
        save_steps=t.save_steps or t.eval_steps,
        save_total_limit=t.save_total_limit,
        logging_steps=t.logging_steps,
        logging_first_step=True,
        **({"gradient_checkpointing": True} if t.gradient_checkpointing else {}),
        dataloader_num_workers=t.dataloader_workers,
        report_to=report_to,
        # Saved in training_args.bin, trainer_state.json and the model card, and given to
        # W&B (tapt.training.tracking): no secrets. WANDB_PROJECT set wins, as in W&B.
        run_name=redact(recipe.tracking.run_name or Path(recipe.output_dir).name),
        project=redact(os.environ.get("WANDB_PROJECT") or recipe.tracking.project),
        disable_tqdm=not stderr_is_terminal(),  # bars only where they redraw in place
        # Without an accelerator, Accelerate only sets up multi-process (gloo) DDP when told
        # it runs on the CPU; otherwise torchrun's ranks would train unsynchronised.
        use_cpu=not has_accelerator(),
    )


def stderr_is_terminal() -> bool:
    """Whether stderr (where progress bars go) is a terminal; bars in a log file or a pipe
    are a line per update, with cursor-up codes when nested."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
