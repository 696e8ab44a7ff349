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
