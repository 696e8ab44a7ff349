"""Run by test_crash_safety.py in a subprocess: train a recipe and, at the given point,
kill this very process with SIGKILL (no cleanup, no exception handlers, like an OOM kill or
a preempted node).

Usage: ``python crash_worker.py RECIPE POINT`` with POINT one of ``none``,
``step:N`` (while optimizer step N runs), ``eval:N`` (during the dev evaluation at step N),
``save:N`` (while checkpoint N is being written: weights on disk, optimizer state not).
"""

from __future__ import annotations

import os
import signal
import sys

from transformers import TrainerCallback

from tapt.recipe import load_recipe
from tapt.retrieval.in_loop import RetrievalEvaluator
from tapt.training.contrastive import train
from tapt.training.trainer import TaptTrainer

recipe_path, point = sys.argv[1], sys.argv[2]
kind, _, number = point.partition(":")
step = int(number) if number else -1


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class KillDuringStep(TrainerCallback):
    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == step - 1:
            die()


callbacks = [KillDuringStep()] if kind == "step" else []
if kind == "eval":
    evaluate = RetrievalEvaluator.__call__

    def dying_evaluation(self, model, output_path=None, epoch=-1, steps=-1):
        if steps == step:
            die()
        return evaluate(self, model, output_path, epoch, steps)
    RetrievalEvaluator.__call__ = dying_evaluation
if kind == "save":
    save_optimizer = TaptTrainer._save_optimizer_and_scheduler

    def dying_save(self, output_dir):
        if self.state.global_step == step:
            die()
        return save_optimizer(self, output_dir)
    TaptTrainer._save_optimizer_and_scheduler = dying_save

train(load_recipe(recipe_path), callbacks=callbacks)
