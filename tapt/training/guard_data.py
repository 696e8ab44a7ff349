"""The guard set (:class:`GuardSet`): a second, out-of-domain BEIR split evaluated beside
dev so that forgetting shows. A TAPT run's (``eval.guard_data``) is evaluated by the
in-loop evaluator at every checkpoint (``guard_*`` metrics; :mod:`tapt.retrieval.in_loop`);
``tapt merge --guard-data``'s at every weight (:mod:`tapt.selection.merge`).

The guard data is loaded and checked before anything of the run is written; a folder that
is missing or unreadable is a :class:`~tapt.recipe.RecipeError` naming ``eval.guard_data``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tapt.data import sources  # sources.load_data looked up at each call
from tapt.data.beir import DataError, strictness
from tapt.data.subcorpus import subcorpus_ids
from tapt.recipe import EvalSettings, RecipeError

GUARD_NAME = "guard"
"""The guard evaluator's name: its metrics are ``guard_<metric>`` in ``metrics.jsonl`` and
``eval_guard_<metric>`` in the trainer's logs."""


def load_guard_data(source: str, split: str, *, relevant_from: int | str = "auto",
                    lenient: bool = False):
    """The guard set's dataset with only ``split`` (the recipe's ``eval.guard_*`` and
    ``tapt merge --guard-*`` read it alike); errors are the loader's."""
    return sources.load_data(source, None, [split], relevant_from=relevant_from,
                             **strictness(lenient))


@dataclass(frozen=True)
class GuardSet:
    """The guard split, its dataset and its sub-corpus (None: the whole corpus), as the
    evaluators read them."""

    dataset: Any
    split: str
    corpus_ids: list[str] | None


def load_guard_set(settings: EvalSettings, seed: int) -> GuardSet | None:
    """The recipe's guard set (None without ``eval.guard_data``; ``settings``: the recipe's
    ``eval`` section): the guard split on its sub-corpus (``eval.guard_distractors``, seeded
    with ``seed``, the recipe's ``data.dev_seed``); the training setup evaluates it as dev
    is (batch size, top-k, dtype, titles)."""
    if settings.guard_data is None:
        return None
    try:
        dataset = load_guard_data(settings.guard_data, settings.guard_split,
                                  relevant_from=settings.guard_relevant_from,
                                  lenient=settings.guard_lenient)
        corpus_ids = subcorpus_ids(dataset, settings.guard_split,
                                   distractors=settings.guard_distractors,
                                   seed=seed)
    except (DataError, OSError) as err:
        raise RecipeError(f"eval.guard_data {settings.guard_data}: {err}") from None
    if not dataset.split(settings.guard_split):
        raise RecipeError(f"eval.guard_data {settings.guard_data}: split "
                          f"'{settings.guard_split}' (eval.guard_split) has no queries")
    return GuardSet(dataset, settings.guard_split, corpus_ids)
