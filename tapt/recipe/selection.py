"""What a TAPT run measures beside dev and which weights it exports: the ``eval.guard_*``
keys (a second, out-of-domain BEIR set evaluated at every checkpoint) and the checks of
``training.average_last`` (export the mean of the last N checkpoints).

Both are TAPT keys: a DAPT recipe that sets them is refused (:func:`check_tapt_only`).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import field_validator, model_validator

from tapt.data.relevance import parse_relevant_from
from tapt.recipe.base import RecipeError, Section, local_path
from tapt.util import bounds


class GuardSettings(Section):
    """The guard set: evaluated at every checkpoint beside dev (metrics ``guard_*``), shown
    in the dev curve and the run report; it never chooses the checkpoint."""

    guard_data: str | None = None
    """A second, local BEIR folder (out of domain, e.g. Cranfield) evaluated at every dev
    evaluation, logged as ``eval_guard_<metric>``; None: no guard set."""
    guard_split: str = "test"
    """Split of the guard data whose queries are evaluated."""
    guard_distractors: Annotated[int, bounds.COUNT] | None = None
    """Guard sub-corpus: every judged passage plus this many distractors, seeded with
    ``data.dev_seed`` (None: the whole guard corpus)."""
    guard_lenient: bool = False
    """Read the guard data leniently, as ``data.lenient`` does the main data (BEIR sets with
    empty passages, e.g. Cranfield, need it)."""
    guard_relevant_from: Literal["auto"] | Annotated[int, bounds.GRADE] = "auto"
    """Lowest relevant grade of the guard data, as ``data.relevant_from`` for the main data."""

    @field_validator("guard_relevant_from", mode="before")
    @classmethod
    def _check_guard_relevant_from(cls, value: Any) -> Any:
        parse_relevant_from(value)
        return value

    @field_validator("guard_data")
    @classmethod
    def _check_guard_data(cls, path: str | None) -> str | None:
        return local_path(path, folder=True)

    @model_validator(mode="after")
    def _check_guard_keys_need_data(self):
        """A ``guard_*`` key off its default without ``guard_data`` would do nothing: refused,
        named (defaults pass: a run folder's recipe.yaml records every key)."""
        if self.guard_data is None:
            given = sorted(name for name, spec in GuardSettings.model_fields.items()
                           if name != "guard_data" and getattr(self, name) != spec.default)
            if given:
                raise ValueError(f"eval.{given[0]} is set but eval.guard_data is not (the "
                                 "guard_* keys describe the guard set; set guard_data or "
                                 "remove them)")
        return self


def saved_checkpoints(max_steps: int, save_steps: int) -> int:
    """Checkpoints a run of ``max_steps`` saves: one every ``save_steps`` and one at the end
    (transformers saves the last step too)."""
    return math.ceil(max_steps / save_steps)


def check_average_last(recipe) -> None:
    """``training.average_last`` (None: off; else N >= 2, checked by the schema) must fit
    the checkpoints the run keeps: the best one is never deleted, so the last N survive
    only when ``training.save_total_limit`` >= N + 1; with ``training.max_steps`` the run
    must save at least N; LoRA runs are refused (averaging adapters A and B is not the
    mean of the merged weights). Raises :class:`RecipeError` naming the key."""
    training = recipe.training
    count = training.average_last
    if count is None:
        return
    if training.save_total_limit < count + 1:
        raise RecipeError(
            f"training.average_last ({count}) needs training.save_total_limit >= {count + 1} "
            f"(got {training.save_total_limit}): the last {count} checkpoints must be kept "
            "besides the best one, which is never deleted")
    if training.max_steps > 0:
        saved = saved_checkpoints(training.max_steps, training.save_steps or training.eval_steps)
        if saved < count:
            raise RecipeError(
                f"training.average_last ({count}) is more than the {saved} checkpoints a run "
                f"of training.max_steps {training.max_steps} saves (one every "
                f"{training.save_steps or training.eval_steps} steps and the last)")
    if recipe.model.lora.enabled:
        raise RecipeError("training.average_last does not work with model.lora.enabled: the "
                          "mean of LoRA adapters is not the mean of the merged weights")


def check_tapt_only(recipe) -> None:
    """A DAPT recipe must not set the TAPT-only keys (they would do nothing)."""
    if recipe.training.average_last is not None:
        raise ValueError("training.average_last is a TAPT recipe key (tapt train); DAPT "
                         "exports its last weights")
    if getattr(recipe.eval, "require_beats_zero_shot", False):
        raise ValueError("eval.require_beats_zero_shot is a TAPT recipe key (tapt train); DAPT "
                         "exports its last weights and has no zero-shot gate")
    if recipe.eval.guard_data is not None:
        raise ValueError("eval.guard_data is a TAPT recipe key (tapt train); DAPT evaluates "
                         "data.dev_data only")
