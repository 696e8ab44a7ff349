"""DAPT's record of each evaluation: held-out loss (and perplexity) with the dev retrieval
metrics, one line of ``metrics.jsonl`` per save."""

from __future__ import annotations

import math

from transformers import TrainerCallback

from tapt.run_folder.layout import RunDir
from tapt.util.files import append_json_line
from tapt.util.process_group import is_main_process


class DaptRecorder(TrainerCallback):
    """At every evaluation: the held-out loss (and perplexity for ``mlm``) with the dev
    retrieval metrics of the encoder as it is, as one line of ``metrics.jsonl``.

    With ``run_retrieval`` the recorder runs the evaluator itself (the masked-LM trainer
    does not know it); otherwise the trainer already ran it (SimCSE on
    sentence-transformers' trainer) and its last record is used.
    """

    def __init__(self, run: RunDir, objective: str, evaluator=None, sync=None,
                 run_retrieval: bool = False) -> None:
        self.run, self.objective = run, objective
        self.evaluator, self.sync, self.run_retrieval = evaluator, sync, run_retrieval
        self.history: list[dict] = []

    def on_evaluate(self, args, state, control, metrics=None, model=None, **kwargs):
        metrics = metrics or {}
        record = {"step": state.global_step, "epoch": state.epoch}
        if "eval_loss" in metrics:
            record["heldout_loss"] = metrics["eval_loss"]
            if self.objective == "mlm":
                record["perplexity"] = math.exp(min(metrics["eval_loss"], 700.0))
        if self.evaluator is not None:
            if self.run_retrieval:
                self.evaluator(self.sync(), steps=state.global_step, epoch=state.epoch)
            last = self.evaluator.history[-1]
            record.update({key: value for key, value in last.items()
                           if key not in ("step", "epoch", "seconds")})
        self.history.append(record)
        if is_main_process():
            append_json_line(self.run.metrics_file, record)
        return control
