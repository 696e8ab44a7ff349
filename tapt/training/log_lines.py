"""Training progress as tapt's own log lines, instead of the Trainer's printed dicts.

transformers' ``ProgressCallback`` writes every log dict under its progress bar (and
``PrinterCallback``, used when bars are off, prints it), so logs get raw
``{'loss': '1.306', ...}`` dicts beside tapt's lines, evaluation dicts twice (tapt's
evaluator already logs its metrics) and, with nested bars, cursor-up escape codes.
:func:`use_log_lines` swaps them for :class:`BarOnlyProgressCallback` (the bar on a
terminal, nothing written under it) and :class:`LogLinesCallback` (one ``logging`` line per
training log: step, loss, learning rate, gradient norm).
"""

from __future__ import annotations

import logging
import math

from transformers.trainer_callback import PrinterCallback, ProgressCallback, TrainerCallback

logger = logging.getLogger("tapt.training")


class BarOnlyProgressCallback(ProgressCallback):
    """transformers' progress bars, without the log dicts written under them."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        return None


class LogLinesCallback(TrainerCallback):
    """One line per training log on the main process; evaluation logs are left to the
    evaluator's own lines; the end-of-training summary becomes one line."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        if "loss" in logs:
            parts = [f"loss {logs['loss']:.4f}"]
            for key, label in (("learning_rate", "lr"), ("grad_norm", "grad norm")):
                if isinstance(logs.get(key), (int, float)):
                    parts.append(f"{label} {logs[key]:.3g}")
            if logs.get("nonfinite_steps"):
                parts.append(f"non-finite steps {int(logs['nonfinite_steps'])}")
            logger.info("step %d/%d: %s", state.global_step, state.max_steps, ", ".join(parts))
        elif "train_runtime" in logs:
            loss = logs.get("train_loss")
            shown = f", mean loss {loss:.4f}" if isinstance(loss, float) and math.isfinite(
                loss) else ""
            logger.info("trained %d steps in %.1f s%s", state.global_step,
                        logs["train_runtime"], shown)


def use_log_lines(trainer) -> None:
    """Replace ``trainer``'s printing callbacks with tapt's (see the module docstring)."""
    for callback in list(trainer.callback_handler.callbacks):
        if type(callback) in (ProgressCallback, PrinterCallback):
            trainer.remove_callback(callback)
            if type(callback) is ProgressCallback:
                trainer.add_callback(BarOnlyProgressCallback())
    trainer.add_callback(LogLinesCallback())
