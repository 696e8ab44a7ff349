"""Model soups: average the weights of several fine-tuned runs of one base model
(Wortsman et al., 2022, "Model soups", Algorithm 1), ``tapt soup`` and ``tapt sweep
--soup K``.

- ``uniform``: the element-wise mean of every ingredient's exported model;
- ``greedy``: the ingredients sorted by their own best dev metric (recorded in each run's
  ``results.json``), best first; each is added to the soup if the mean of the soup and it
  scores at least as well on dev as the soup without it (Wortsman's ``>=``). The soup
  starts as the best ingredient alone, evaluated with the same evaluator, so a greedy soup
  never scores below its best ingredient on dev.

Every ingredient must be a finished tapt run (``final/``, ``recipe.yaml``,
``results.json``) of the same architecture, evaluated on the same dev set: the recipes'
dev data keys (:data:`DEV_KEYS`: path, config, splits, carve, decontamination, distractors,
relevance rule, titles) and dev metric must be equal, else the soup is refused naming the
key. The dev set is the recipes' (``tapt.training.inputs.load_recipe_data``: a carved
dev split too); a carved one is rebuilt from today's data, so it must be the carve every
ingredient recorded in its ``results.json`` (``dev_carve``: the same queries, carved the
same way; :func:`tapt.selection.merge.check_carve`), else the soup is refused naming the
run and the field before any model loads (dev could hold an ingredient's training
queries). The evaluation is ``tapt eval``'s (:func:`tapt.selection.merge.dev_metrics`). The
result is a normal tapt export (:func:`tapt.selection.merge_export.export_merge`) whose card
and ``merge.json`` list the ingredients, the weights and each greedy step.

Limits: every ingredient's state dict is held in memory at once (K x the float32 model)
plus one working copy; the greedy soup costs K dev evaluations, the uniform one 1.

Example::

    from tapt.selection.soup import soup

    result = soup(["runs/a", "runs/b", "runs/c"], "runs/soup", method="greedy")
    result.ingredients, result.dev["binary_ndcg@10"]
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tapt.data.subcorpus import subcorpus_ids
from tapt.encoders.model_digest import weights_digest
from tapt.recipe import RecipeError, load_recipe
from tapt.run_folder.start import input_paths
from tapt.selection.merge import (
    DevSettings,
    carve_difference,
    check_carve,
    check_same_architecture,
    dev_metrics,
    load_sources,
    read_carve,
)
from tapt.selection.merge_export import check_merge_output, export_merge
from tapt.training.inputs import load_recipe_data
from tapt.training.weights import MergeError, merge_into
from tapt.util.digests import file_digest
from tapt.util.finite import metric_value

logger = logging.getLogger(__name__)

SoupMethod = Literal["greedy", "uniform"]
DEV_SET_KEYS = ("path", "config", "revision", "train_split", "dev_split", "dev_from_train",
                "dev_carve", "dev_seed", "dev_distractors", "relevant_from", "lenient",
                "decontaminate")
"""The recipe ``data`` keys that decide which dev queries, passages and grades are scored
(the carve is made from the train split after its decontamination): one value in every
ingredient of a soup and every trial of a sweep (:mod:`tapt.selection.sweep`)."""
CARVED_DEV_KEYS = ("train_split", "dev_carve", "decontaminate")
"""Of :data:`DEV_SET_KEYS`, those that change the dev set only when it is carved from train
(``data.dev_from_train``): a dev split read from the data is not touched by them."""
DEV_KEYS = (*DEV_SET_KEYS, "with_title")
"""The recipe ``data`` keys that define the dev evaluation (the set, and how its passages
are encoded): equal in every ingredient."""
TIE_TOLERANCE = 1e-9


@dataclass
class Ingredient:
    """One finished run: its folder, export and recorded best dev metrics."""

    run: Path
    recipe: object
    recorded_dev: dict[str, float]
    carve: dict | None = None
    """The dev carve the run recorded (``results.json``'s ``dev_carve``; None: none)."""

    @property
    def model(self) -> Path:
        return self.run / "final"


@dataclass
class SoupStep:
    """One greedy step: the ingredient tried, the soup's dev metrics with it, kept or not."""

    ingredient: str
    dev: dict[str, float]
    kept: bool


@dataclass
class SoupResult:
    output: Path
    method: SoupMethod
    ingredients: list[str]
    """The runs in the soup, in the order they were added."""
    weights: list[float]
    dev: dict[str, float]
    steps: list[SoupStep] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"method": self.method, "ingredients": self.ingredients,
                "weights": self.weights, "dev": self.dev,
                "steps": [vars(step) for step in self.steps]}


def read_ingredient(run: str | Path, metric: str | None = None) -> Ingredient:
    """A finished run folder as an :class:`Ingredient`; anything else is a MergeError naming
    the folder and what is missing."""
    run = Path(run)
    results, recipe_file = run / "results.json", run / "recipe.yaml"
    if not (run / "final").is_dir() or not results.is_file() or not recipe_file.is_file():
        raise MergeError(f"{run}: not a finished tapt run (needs final/, results.json and "
                         "recipe.yaml)")
    try:
        record = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise MergeError(f"{results}: cannot be read ({err})") from None
    if not isinstance(record, dict) or record.get("status") != "finished":
        raise MergeError(f"{results}: the run did not finish")
    try:
        recipe = load_recipe(recipe_file)
    except RecipeError as err:
        raise MergeError(str(err)) from None
    summary = record.get("summary")
    dev = summary.get("best dev") if isinstance(summary, dict) else None
    wanted = metric or recipe.eval.metric
    if not isinstance(dev, dict) or wanted not in dev:
        raise MergeError(f"{results}: no 'best dev' {wanted} recorded")
    if not metric_value(dev[wanted]):
        raise MergeError(f"{results}: field 'summary.best dev.{wanted}': expected a finite "
                         f"number in [0, 1], got {dev[wanted]!r}")
    return Ingredient(run=run, recipe=recipe, recorded_dev=dev,
                      carve=read_carve(results, record))


def check_same_dev(ingredients: Sequence[Ingredient]) -> None:
    """Refuse ingredients whose recipes evaluate dev differently, naming the key."""
    first = ingredients[0]
    carved = any(i.recipe.data.dev_from_train is not None for i in ingredients)
    for other in ingredients[1:]:
        for key in DEV_KEYS:
            if key in CARVED_DEV_KEYS and not carved:
                continue  # a dev split read from the data: the same whatever these are
            a, b = getattr(first.recipe.data, key), getattr(other.recipe.data, key)
            if a != b:
                raise MergeError(f"data.{key} differs between {first.run} ({a!r}) and "
                                 f"{other.run} ({b!r}): a soup's ingredients must share one "
                                 "dev set")
        difference = carve_difference(first.carve, other.carve)
        if difference is not None:
            key, a, b = difference
            raise MergeError(f"the dev carves recorded in {first.run / 'results.json'} and "
                             f"{other.run / 'results.json'} differ (field '{key}': {a!r} vs "
                             f"{b!r}): a soup's ingredients must share one dev set")
        if first.recipe.eval.metric != other.recipe.eval.metric:
            raise MergeError(f"eval.metric differs between {first.run} and {other.run}")
        if first.recipe.model.max_seq_length != other.recipe.model.max_seq_length:
            raise MergeError(f"model.max_seq_length differs between {first.run} and "
                             f"{other.run}")


def check_distinct_runs(runs: Sequence[str | Path]) -> None:
    """Refuse a run given twice, however spelled (``runs/a``, ``./runs/a/``, a symlink to
    it): runs are compared by their resolved folders, not their names."""
    seen: dict[Path, str] = {}
    for run in runs:
        resolved = Path(run).resolve()
        if resolved in seen:
            raise MergeError(f"{run} and {seen[resolved]} are one run ({resolved}): each "
                             "ingredient once")
        seen[resolved] = str(run)


def check_distinct_weights(models: Sequence, ingredients: Sequence[Ingredient]) -> None:
    """Refuse a copied run folder (identical weights and an identical ``results.json``):
    the soup would count one run twice. Two runs whose training ended on the same weights
    (both exported their starting point) are distinct runs: a warning says so."""
    seen: dict[str, Ingredient] = {}
    for model, ingredient in zip(models, ingredients, strict=True):
        digest = weights_digest(model)
        if (other := seen.get(digest)) is not None:
            if file_digest(other.run / "results.json") == \
                    file_digest(ingredient.run / "results.json"):
                raise MergeError(f"{ingredient.run} and {other.run} are copies of one run "
                                 "(identical weights and results.json): each ingredient once")
            logger.warning("%s and %s hold identical weights (two runs that ended on the "
                           "same model): the soup weighs that model twice", ingredient.run,
                           other.run)
        seen[digest] = ingredient


def dev_settings(recipe):
    """The :class:`~tapt.selection.merge.DevSettings` of a recipe's own dev evaluation."""
    dataset = load_recipe_data(recipe, with_test=False)
    data = recipe.data
    corpus_ids = subcorpus_ids(dataset, data.dev_split, distractors=data.dev_distractors,
                               seed=data.dev_seed)
    return DevSettings(dataset=dataset, split=data.dev_split, corpus_ids=corpus_ids,
                       metric=recipe.eval.metric, with_title=data.with_title,
                       batch_size=recipe.eval.batch_size, top_k=recipe.eval.top_k,
                       max_tokens_per_batch=recipe.eval.max_tokens_per_batch,
                       dtype=recipe.eval.dtype)


def uniform(count: int) -> list[float]:
    return [1.0 / count] * count


def greedy_order(ingredients: Sequence[Ingredient], metric: str) -> list[int]:
    """Indices by recorded best dev ``metric``, best first (ties: the given order)."""
    return sorted(range(len(ingredients)), key=lambda i: -ingredients[i].recorded_dev[metric])


def soup(runs: Sequence[str | Path], output: str | Path, *, method: SoupMethod = "greedy",
         overwrite: bool = False, export_dtype: str = "float32",
         on_step: Callable[[SoupStep], None] | None = None) -> SoupResult:
    """Cook the soup of ``runs`` (finished run folders, at least 2) into the tapt export
    ``output`` (see the module docstring); ``output`` is checked before anything loads:
    never on, inside or around a run folder, its export or what its recipe reads."""
    if len(runs) < 2:
        raise MergeError(f"a soup needs at least 2 runs, got {len(runs)}")
    check_distinct_runs(runs)
    output = Path(output)
    ingredients = [read_ingredient(run) for run in runs]
    check_merge_output(output, [str(i.model) for i in ingredients], overwrite=overwrite,
                       inputs=[(key, path) for i in ingredients
                               for key, path in [("RUN", i.run), *input_paths(i.recipe)]])
    check_same_dev(ingredients)
    settings = dev_settings(ingredients[0].recipe)
    for ingredient in ingredients:  # today's carve is the one each run trained beside
        check_carve(ingredient.run, ingredient.carve, settings.dataset.carved)
    metric = settings.metric
    names = [str(i.model) for i in ingredients]
    models, specs = load_sources(names)
    check_same_architecture(models, names)
    check_distinct_weights(models, ingredients)
    states = [model.state_dict() for model in models]
    work = copy.deepcopy(models[0])

    def taste(members: list[int]) -> dict[str, float]:
        merge_into(work, [states[i] for i in members], uniform(len(members)),
                   [names[i] for i in members])
        metrics, _, _ = dev_metrics(work, settings, f"soup of {len(members)}")
        return metrics

    steps: list[SoupStep] = []
    if method == "uniform":
        members = list(range(len(ingredients)))
        best = taste(members)
    else:
        order = greedy_order(ingredients, metric)
        members = [order[0]]
        best = taste(members)
        steps.append(SoupStep(str(ingredients[order[0]].run), best, True))
        for index in order[1:]:
            tried = taste([*members, index])
            kept = tried[metric] >= best[metric] - TIE_TOLERANCE
            if kept:
                members, best = [*members, index], tried
            steps.append(SoupStep(str(ingredients[index].run), tried, kept))
            if on_step is not None:
                on_step(steps[-1])
    weights = [1.0 / len(members) if i in members else 0.0 for i in range(len(ingredients))]
    merge_into(work, [states[i] for i in members], uniform(len(members)),
               [names[i] for i in members])
    result = SoupResult(output=output, method=method,
                        ingredients=[str(ingredients[i].run) for i in members],
                        weights=weights, dev=best, steps=steps)
    states.clear()  # the ingredients are not needed for the export
    models.clear()
    export_merge(work, output, spec=specs[0], sources=specs, weights=weights,
                 overwrite=overwrite, dtype=export_dtype, soup=result.to_dict())
    return result
