"""Errors a training run ends with (kept free of heavy imports: the CLI catches them)."""

from __future__ import annotations


class NonFiniteTrainingError(RuntimeError):
    """Training produced a NaN/inf loss, gradient or dev evaluation and stopped.

    Attributes:
        events: One record per non-finite optimizer step seen (step, which part was not
            finite, the batch's query ids).
    """

    def __init__(self, message: str, events: list[dict] | None = None) -> None:
        super().__init__(message)
        self.events = list(events or [])


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during training: where the run is and what it can resume from.

    Attributes:
        run_dir: The run folder.
        checkpoint: Its last complete checkpoint (None: the run restarts from the start).
    """

    def __init__(self, run_dir, checkpoint: str | None) -> None:
        super().__init__(f"interrupted: {run_dir}")
        self.run_dir, self.checkpoint = run_dir, checkpoint

    def message(self, command: str) -> str:
        """One line for the user: the last checkpoint and the command that resumes."""
        where = (f"the last complete checkpoint is {self.checkpoint}" if self.checkpoint
                 else f"no checkpoint was completed yet in {self.run_dir}")
        return f"interrupted: {where}; resume with: {command}"


class ZeroShotGateError(RuntimeError):
    """``eval.require_beats_zero_shot``: the exported weights' dev score is not above the
    zero-shot one (or could not be compared); ``results.json`` records the run, nothing is
    exported (:mod:`tapt.training.zero_shot_gate`).

    Attributes:
        gate: The ``zero_shot_gate`` record (metric, zero-shot and best scores).
    """

    def __init__(self, message: str, gate: dict) -> None:
        super().__init__(message)
        self.gate = dict(gate)
