"""``tapt combine``: a dense model and a lexical model Λ in one SentenceTransformer (SPAR).

The combined model (:mod:`tapt.encoders.lexical_branch`) scores ``d(q)·d(p) + w
Λ(q)·Λ(p)`` with one vector per text, so one index serves what would otherwise be a dense
index fused with BM25. ``w`` is given, or picked on a dev split: each model encodes the
dev queries and the dev sub-corpus once, and every weight of the grid is scored from those
embeddings through tapt's evaluation (:func:`tapt.retrieval.evaluate.evaluate`), as the
combined model would score them (the same concatenation, the same similarity); the best
``metric`` is kept (ties: the smaller weight).

The folder is a tapt export: the SentenceTransformer (the dense model's modules, then the
branch holding Λ), ``tapt_preset.json`` (``stage: combine``), ``combine.json`` (the two
models, the weight, the dev grid when one was evaluated, and ``files``: every entry the
export holds, so ``--overwrite`` replaces only such a folder:
:mod:`tapt.util.folder_replace`), ``LICENSE`` (Apache-2.0) and a card saying how to load it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tapt.cards.combine_card import combine_card
from tapt.cards.common import apache_license_text
from tapt.encoders.base import Encoder
from tapt.encoders.lexical_branch import combine
from tapt.encoders.preset_record import write_preset_record
from tapt.retrieval.evaluate import evaluate
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.retrieval.retriever_factory import build_retriever
from tapt.selection.merge import DevSettings, load_sources
from tapt.selection.merge_export import check_merge_output, listed_entries, source_records
from tapt.training.weights import MergeError
from tapt.util.bounds import LEXICAL_WEIGHT
from tapt.util.files import atomic_write_json, atomic_write_text, staging_folder
from tapt.util.folder_replace import FolderRecord, replace_folder

COMBINE_FILE = "combine.json"
DEFAULT_WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
"""The weights of Λ tried on dev by default (0: the dense model alone)."""
FORMULA = ("embedding(x) = [dense(x), sqrt(w) * lexical(x)]: an inner product scores "
           "dense(q)·dense(p) + w * lexical(q)·lexical(p)")


def combine_entries(folder: Path) -> list[str]:
    """What a combine export holds by its records
    (:func:`tapt.selection.merge_export.listed_entries`, ``combine.json``)."""
    return listed_entries(folder, "combine", COMBINE_FILE)


COMBINE_RECORD = FolderRecord("tapt combine export", COMBINE_FILE, combine_entries)


class RememberedEncoder(Encoder):
    """An encoder that embeds each distinct text once (dev is scored at many weights)."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.name = encoder.name
        self.normalize = encoder.normalize
        self.known: dict[tuple[str, str], np.ndarray] = {}

    @property
    def embedding_dim(self) -> int:
        return self.encoder.embedding_dim

    def _rows(self, texts: Sequence[str], kind: str, batch_size: int) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if (kind, t) not in self.known))
        if missing:
            encode = self.encoder.encode_queries if kind == "query" else \
                self.encoder.encode_corpus
            for text, row in zip(missing, encode(missing, batch_size=batch_size)):
                self.known[(kind, text)] = np.asarray(row, dtype=np.float32)
        return np.stack([self.known[(kind, t)] for t in texts]) if texts else \
            np.zeros((0, self.embedding_dim), dtype=np.float32)

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return self._rows(list(texts), "query", batch_size)

    def encode_corpus(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return self._rows(list(texts), "document", batch_size)


class WeightedPair(Encoder):
    """``[dense(x), sqrt(weight) * lexical(x)]``, as the combined model embeds ``x``."""

    def __init__(self, dense: Encoder, lexical: Encoder, weight: float,
                 normalize: bool) -> None:
        self.dense, self.lexical, self.weight = dense, lexical, weight
        self.name = f"{dense.name}+{math.sqrt(weight):g}*{lexical.name}"
        self.normalize = normalize

    @property
    def embedding_dim(self) -> int:
        return self.dense.embedding_dim + self.lexical.embedding_dim

    def _pair(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return np.concatenate([first, math.sqrt(self.weight) * second], axis=1)

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return self._pair(self.dense.encode_queries(texts, batch_size),
                          self.lexical.encode_queries(texts, batch_size))

    def encode_corpus(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return self._pair(self.dense.encode_corpus(texts, batch_size),
                          self.lexical.encode_corpus(texts, batch_size))


@dataclass
class WeightPoint:
    weight: float
    metrics: dict[str, float]


@dataclass
class CombineResult:
    output: Path
    weight: float
    points: list[WeightPoint] = field(default_factory=list)
    metric: str | None = None


def pick_weight(dense, lexical, names: Sequence[str], dev: DevSettings,
                grid: Sequence[float], on_point: Callable[[WeightPoint], None] | None = None
                ) -> tuple[float, list[WeightPoint]]:
    """Score every weight of ``grid`` on ``dev`` (module docstring); the best weight by
    ``dev.metric`` (ties: the smaller) and every point."""
    from tapt.encoders.factory import ModelOptions, wrap_model

    options = ModelOptions(dtype=dev.dtype, progress=dev.progress, batch_size=dev.batch_size,
                           max_tokens_per_batch=dev.max_tokens_per_batch)
    first = RememberedEncoder(wrap_model(dense, options, name=names[0]))
    second = RememberedEncoder(wrap_model(lexical, options, name=names[1]))
    cosine = (dense.similarity_fn_name or "cosine") == "cosine"
    points = []
    for weight in grid:
        encoder = WeightedPair(first, second, weight, normalize=cosine)
        report = evaluate(build_retriever(encoder, batch_size=dev.batch_size, top_k=dev.top_k),
                          dev.dataset, dev.split, corpus_ids=dev.corpus_ids,
                          with_title=dev.with_title)
        point = WeightPoint(weight, {key: float(report.metrics[key]) for key in METRIC_KEYS})
        points.append(point)
        if on_point is not None:
            on_point(point)
    best = max(points, key=lambda point: (point.metrics[dev.metric], -point.weight))
    return best.weight, points


def check_combine_output(output: Path, sources: Sequence[str], *, overwrite: bool,
                         inputs: Sequence[tuple[str, str | os.PathLike | None]] = ()) -> None:
    """Before anything loads: ``output`` apart from the two models and ``inputs`` (the dev
    data), and, when it exists, replaceable (``overwrite`` and a combine export holding
    nothing else: :data:`COMBINE_RECORD`); :func:`tapt.selection.merge_export.check_merge_output`'s
    rule."""
    check_merge_output(output, sources, overwrite=overwrite, inputs=inputs,
                       record=COMBINE_RECORD, made="combined model")


def check_grid(grid: Sequence[float]) -> list[float]:
    """The weights, each in :data:`tapt.util.bounds.LEXICAL_WEIGHT`, at least one, none
    twice."""
    grid = [float(weight) for weight in grid]
    if not grid:
        raise MergeError("give at least one weight")
    for weight in grid:
        try:
            LEXICAL_WEIGHT.check(weight, "the lexical weight")
        except ValueError as err:
            raise MergeError(str(err)) from None
    if len(set(grid)) != len(grid):
        raise MergeError("a weight appears twice")
    return grid


def combine_models(dense_name: str, lexical_name: str, output: str | Path, *,
                   weight: float | None = None, dev: DevSettings | None = None,
                   grid: Sequence[float] = DEFAULT_WEIGHTS, overwrite: bool = False,
                   inputs: Sequence[tuple[str, str | os.PathLike | None]] = (),
                   on_point: Callable[[WeightPoint], None] | None = None) -> CombineResult:
    """Combine ``dense_name`` and ``lexical_name`` into the export ``output`` with
    ``weight``, or with the weight of ``grid`` that scores best on ``dev`` (one of the
    two must be given). ``output`` is checked before anything loads."""
    if (weight is None) == (dev is None):
        raise MergeError("give a weight, or dev data to pick one on (not both)")
    grid = check_grid([weight] if weight is not None else grid)
    output = Path(output)
    check_combine_output(output, [dense_name, lexical_name], overwrite=overwrite,
                         inputs=inputs)
    (dense, lexical), specs = load_sources([dense_name, lexical_name])
    points: list[WeightPoint] = []
    if dev is not None:
        weight, points = pick_weight(dense, lexical, [dense_name, lexical_name], dev, grid,
                                     on_point)
    try:
        model = combine(dense, lexical, weight)
    except ValueError as err:
        raise MergeError(str(err)) from None
    records = source_records(specs, [1.0, weight])
    staging = staging_folder(output)
    staging.mkdir(parents=True)
    model.save(str(staging), create_model_card=False, safe_serialization=True)
    (staging / "LICENSE").write_text(apache_license_text(), encoding="utf-8")
    write_preset_record(staging, model, specs[0], stage="combine",
                        sources=records, lexical_weight=weight)
    entries = sorted({*(path.name for path in staging.iterdir()), COMBINE_FILE})
    atomic_write_json(staging / COMBINE_FILE, {
        "dense": records[0], "lexical": records[1], "weight": weight, "formula": FORMULA,
        "pick_on_dev": None if dev is None else {
            "metric": dev.metric, "split": dev.split, "picked": weight,
            "points": [{"weight": p.weight, "metrics": p.metrics} for p in points]},
        "files": entries})
    atomic_write_text(staging / "README.md", combine_card(
        records, weight, points, None if dev is None else dev.metric,
        {"data": str(dev.dataset.source) if dev else None, "split": dev.split if dev else None},
        formula=FORMULA))
    replace_folder(staging, output, overwrite=overwrite, record=COMBINE_RECORD,
                   error=MergeError)
    return CombineResult(output=output, weight=weight, points=points,
                         metric=None if dev is None else dev.metric)
