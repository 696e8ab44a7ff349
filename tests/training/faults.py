"""Faults injected into training runs: a NaN loss at chosen steps, a crash after a step."""

from __future__ import annotations

from collections.abc import Callable, Collection

from transformers import TrainerCallback


def poisoning(build: Callable, steps: Collection[int]) -> Callable:
    """Wrap tapt's ``build_loss``: the built loss returns NaN at the given training calls
    (1-based; one call per optimizer step without gradient accumulation)."""
    def building(model, settings):
        loss = build(model, settings)
        forward = loss.forward
        calls = {"n": 0}

        def poisoned(*args, **kwargs):
            value = forward(*args, **kwargs)
            if loss.training:
                calls["n"] += 1
                if calls["n"] in steps:
                    return value * float("nan")
            return value
        loss.forward = poisoned
        return loss
    return building


class CrashAt(TrainerCallback):
    """Simulate a crash (KeyboardInterrupt) right after optimizer step ``step``."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise KeyboardInterrupt("simulated crash")
