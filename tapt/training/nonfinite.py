"""Stopping (or skipping) training steps whose loss or gradients are not finite.

transformers' Trainer logs the loss only every ``logging_steps``, replaces a NaN loss by
the running average in what it logs (``logging_nan_inf_filter``), and steps the optimizer
with NaN gradients, which turns every weight into NaN. This guard checks the loss of every
micro-batch and the gradients before every optimizer step:

- ``stop``: raise :class:`NonFiniteTrainingError` before the update, naming the step and
  the batch's query ids. The weights are still finite and the last checkpoint is kept;
  tapt writes no ``final/``.
- ``skip``: drop the gradients so the optimizer leaves the weights alone, count the step
  (``nonfinite_steps`` in the logs and results), and stop as ``stop`` does once more than
  ``max_steps`` steps were skipped.

A dev evaluation refused for non-finite embeddings (the evaluator records it, and its NaN
metrics can never make that checkpoint the best) stops the run under ``stop`` too, before
that checkpoint is saved.

Under DDP the decision is all-reduced so every rank skips or stops together.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from transformers import TrainerCallback

from tapt.training.errors import NonFiniteTrainingError

__all__ = ["QUERY_IDS_KEY", "NonFiniteGuard", "NonFiniteTrainingError", "QueryIdsCollator"]

logger = logging.getLogger(__name__)

QUERY_IDS_KEY = "tapt_query_ids"
"""Batch key under which :class:`QueryIdsCollator` passes the batch's query ids."""

IDS_SHOWN = 16


@dataclass
class NonFiniteEvent:
    step: int
    loss_finite: bool
    gradients_finite: bool
    query_ids: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    """Under DDP, the ranks whose own loss was not finite (their batches' ids are named)."""

    def describe(self) -> str:
        what = " and ".join(name for name, ok in (("loss", self.loss_finite),
                                                   ("gradient norm", self.gradients_finite))
                            if not ok) or "loss or gradient norm"
        ids = f" on rank {', '.join(map(str, self.ranks))}" if self.ranks else ""
        if self.query_ids:
            shown = ", ".join(self.query_ids[:IDS_SHOWN])
            more = len(self.query_ids) - IDS_SHOWN
            ids += f"; the batch held queries {shown}" + (f" and {more} more" if more > 0
                                                             else "")
        return f"non-finite {what} at optimizer step {self.step}{ids}"


class QueryIdsCollator:
    """Wrap a sentence-transformers data collator so each batch carries its query ids.

    The trainer's batches hold token ids only; the ids come from the query texts
    (``ids_by_text``), so an error can name the queries of the batch that broke.
    """

    def __init__(self, inner, ids_by_text: dict[str, str], column: str = "query") -> None:
        self.inner = inner
        self.ids_by_text = ids_by_text
        self.column = column

    def __call__(self, features: list[dict]) -> dict:
        batch = self.inner(features)
        if features and self.column in features[0]:
            batch[QUERY_IDS_KEY] = [self.ids_by_text.get(row[self.column], "?")
                                    for row in features]
        return batch

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def gradients_finite(model) -> object:
    """A 0-dim bool tensor: whether every gradient of ``model`` is finite (no host sync)."""
    import torch

    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if not grads:
        return torch.tensor(True)
    total_norm = getattr(torch.nn.utils, "get_total_norm", None)  # torch >= 2.6
    norm = total_norm(grads) if total_norm else torch.stack([g.float().norm() for g in grads]).norm()
    return torch.isfinite(norm)


class NonFiniteGuard(TrainerCallback):
    """See the module docstring. The trainer feeds it each micro-batch's loss
    (:meth:`observe_loss`); the check runs in ``on_pre_optimizer_step``."""

    def __init__(self, policy: str = "stop", max_steps: int = 10, evaluator=None) -> None:
        if policy not in ("stop", "skip"):
            raise ValueError(f"on_nonfinite must be 'stop' or 'skip', got {policy!r}")
        self.policy = policy
        self.max_steps = max_steps
        self.evaluator = evaluator
        self.events: list[NonFiniteEvent] = []
        self._refusals_seen = 0
        self._loss_ok = None
        self._query_ids: list[str] = []

    @property
    def skipped(self) -> int:
        return len(self.events)

    def observe_loss(self, loss, query_ids: Sequence[str] | None = None) -> None:
        """Record one micro-batch's loss (kept on the device: no synchronisation here)."""
        import torch

        finite = torch.isfinite(loss.detach()).all()
        self._loss_ok = finite if self._loss_ok is None else self._loss_ok & finite
        if query_ids:
            self._query_ids.extend(query_ids)

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        import torch
        import torch.distributed as dist

        loss_ok = self._loss_ok if self._loss_ok is not None else torch.tensor(True)
        grads_ok = gradients_finite(model)
        local = torch.stack([loss_ok.to(grads_ok.device), grads_ok]).to(torch.int32)
        flags = local.clone()
        distributed = dist.is_available() and dist.is_initialized()
        if distributed:
            if dist.get_backend() == "nccl":
                flags = flags.cuda()
            dist.all_reduce(flags, op=dist.ReduceOp.MIN)
        loss_finite, grads_finite = (bool(v) for v in flags.tolist())
        query_ids, self._query_ids, self._loss_ok = self._query_ids, [], None
        if loss_finite and grads_finite:
            return control
        # Rare path: every rank is here, so gathering which batch broke is safe.
        local_report = (bool(local[0]), list(query_ids))
        reports = [local_report]
        if distributed:
            reports = [None] * dist.get_world_size()
            dist.all_gather_object(reports, local_report)
        broken = [rank for rank, (ok, _) in enumerate(reports) if not ok]
        ids = [i for rank in (broken or range(len(reports))) for i in reports[rank][1]]
        event = NonFiniteEvent(step=state.global_step + 1, loss_finite=loss_finite,
                               gradients_finite=grads_finite, query_ids=ids,
                               ranks=broken if distributed else [])
        self.events.append(event)
        if self.policy == "stop":
            raise NonFiniteTrainingError(
                f"{event.describe()}; the run stops before this update (training."
                "on_nonfinite: stop). Lower training.learning_rate, raise warmup, or set "
                "training.on_nonfinite: skip to drop such steps.", self.records())
        if self.skipped > self.max_steps:
            raise NonFiniteTrainingError(
                f"{event.describe()}; that is {self.skipped} non-finite steps, more than "
                f"training.max_nonfinite_steps ({self.max_steps}): the run stops.",
                self.records())
        logger.warning("%s: update skipped (%d so far)", event.describe(), self.skipped)
        model.zero_grad(set_to_none=True)
        return control

    def on_evaluate(self, args, state, control, **kwargs):
        refusals = getattr(self.evaluator, "refusals", [])
        new, self._refusals_seen = refusals[self._refusals_seen:], len(refusals)
        if new and self.policy == "stop":
            raise NonFiniteTrainingError(
                f"dev evaluation at step {new[-1]['step']} refused: {new[-1]['error']} "
                "The run stops (training.on_nonfinite: stop); this checkpoint is not saved.",
                self.records())
        return control

    def records(self) -> list[dict]:
        return [vars(event) for event in self.events]


def check_exportable(model, evaluator, best_step: int | None, *,
                     weights: str = "the trained weights") -> None:
    """Refuse to export weights that are not finite, or a run none of whose checkpoints
    had a finite dev evaluation (the trainer would hand back the last weights);
    ``evaluator`` may be None (no dev evaluation); ``weights`` names them in the error."""
    import torch

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
