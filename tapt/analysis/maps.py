"""Embedding maps (FormBench Figures 9-10): a 2-D projection of passage embeddings, one
panel per model side by side, each passage coloured by a label field of the corpus (e.g.
the CPC class), to see whether a model keeps the labels apart.

The passages are those with the label, in corpus order, at most ``sample`` of them (a
seeded sample, the same for every model); each model embeds them through tapt's one
encoding path (:func:`tapt.analysis.embed.embed`: the embedding cache, long passages, the
non-finite check), rows scaled to unit length (Euclidean distance then orders pairs as the
cosine does). The projection is UMAP (``umap-learn``, the ``tapt[maps]`` extra) when it is
installed, else t-SNE (scikit-learn; started from the PCA of the rows, scikit-learn's
default, so it has no random start), seeded with ``seed``: the same seed gives the same
sample and the same coordinates.

Example::

    labels = read_labels("data/synth", ["domain"])["domain"]
    result = embedding_maps({"base": base, "tapt": tapt}, dataset, labels, field="domain")
    map_figure(result).savefig("map.png")
"""

from __future__ import annotations

import importlib.util
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tapt.analysis import plots
from tapt.analysis.embed import embed, materialized, unit_rows
from tapt.data.arrow_corpus import corpus_texts as passage_texts
from tapt.data.beir import BeirDataset
from tapt.retrieval.dense import EncodingTally
from tapt.util.bounds import MAP_SAMPLE, POSITIVE_INT, SEED

# umap-learn and scikit-learn are imported by the projection: importing tapt.analysis
# must not import them.

METHODS = ("auto", "umap", "tsne")
UMAP_NEIGHBORS = 15
TSNE_PERPLEXITY = 30.0


def choose_method(method: str = "auto") -> str:
    """``umap`` or ``tsne``: ``auto`` is UMAP when umap-learn is installed; ``umap`` without
    it is an error naming the extra."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    installed = importlib.util.find_spec("umap") is not None
    if method == "umap" and not installed:
        raise ValueError('umap-learn is not installed; --method umap needs it: pip install '
                         '"tapt[maps]" (or use --method tsne)')
    return ("umap" if installed else "tsne") if method == "auto" else method


def project(x: np.ndarray, method: str, seed: int = 0) -> np.ndarray:
    """``(n, 2)`` coordinates of the rows of ``x`` (at least 3) by ``umap`` or ``tsne``,
    seeded; the neighbourhood (UMAP's neighbours, t-SNE's perplexity) shrinks for small n."""
    n = len(x)
    if n < 3:
        raise ValueError(f"a map needs at least 3 passages, got {n}")
    if method == "umap":
        import umap

        reducer = umap.UMAP(n_components=2, n_neighbors=min(UMAP_NEIGHBORS, n - 1),
                            random_state=seed)
    elif method == "tsne":
        from sklearn.manifold import TSNE

        reducer = TSNE(n_components=2, perplexity=min(TSNE_PERPLEXITY, (n - 1) / 3),
                       init="pca", random_state=seed)
    else:
        raise ValueError(f"method must be umap or tsne, got {method!r}")
    return np.asarray(reducer.fit_transform(x), dtype=np.float64)


def map_passages(labels: Mapping[str, str], corpus_ids: Sequence[str], *,
                 sample: int | None = None, seed: int = 0) -> list[str]:
    """The labelled passages in corpus order, at most ``sample`` (a seeded sample)."""
    ids = [doc_id for doc_id in corpus_ids if doc_id in labels]
    if sample is not None and len(ids) > sample:
        keep = set(random.Random(seed).sample(ids, sample))
        ids = [doc_id for doc_id in ids if doc_id in keep]
    return ids


@dataclass
class MapResult:
    """The passages, their labels and each model's coordinates (``coords[model]``: n x 2)."""

    field: str
    method: str
    seed: int
    ids: list[str]
    labels: list[str]
    coords: dict[str, np.ndarray] = field(default_factory=dict)
    corpus_from_cache: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"field": self.field, "method": self.method, "seed": self.seed,
                "passages": len(self.ids), "classes": len(set(self.labels)),
                "corpus_from_cache": self.corpus_from_cache,
                "points": {model: [{"id": doc_id, "label": label, "x": float(x), "y": float(y)}
                                   for doc_id, label, (x, y) in zip(self.ids, self.labels,
                                                                    coords, strict=True)]
                           for model, coords in self.coords.items()}}


def embedding_maps(encoders: Mapping[str, object], dataset: BeirDataset,
                   labels: Mapping[str, str], *, field: str, sample: int | None = 2000,
                   seed: int = 0, method: str = "auto", batch_size: int = 32,
                   with_title: bool = True, cache_dir: str | None = None,
                   on_model=None) -> MapResult:
    """Embed the labelled passages (``labels``: {passage id: label} of ``field``) with every
    model of ``encoders`` (an encoder or a zero-argument loader of one) and project them."""
    SEED.check(seed, "seed")
    POSITIVE_INT.check(batch_size, "batch_size")
    if sample is not None:
        MAP_SAMPLE.check(sample, "sample")
    chosen = choose_method(method)
    ids = map_passages(labels, list(dataset.corpus), sample=sample, seed=seed)
    if len(ids) < 3:
        labelled = sum(1 for doc_id in dataset.corpus if doc_id in labels)
        raise ValueError(f"{labelled} passage(s) of the corpus have label '{field}'; a map "
                         "needs at least 3")
    result = MapResult(field=field, method=chosen, seed=seed, ids=ids,
                       labels=[labels[doc_id] for doc_id in ids])
    texts = passage_texts(dataset.corpus, ids, with_title)  # lazy for Arrow
    for name, encoder in encoders.items():
        if on_model is not None:
            on_model(name)
        tally = EncodingTally()
        with materialized(encoder) as model:
            x = unit_rows(embed(model, texts, "document", ids=ids, batch_size=batch_size,
                                cache_dir=cache_dir, tally=tally))
        result.coords[name] = project(x, chosen, seed)
        result.corpus_from_cache[name] = tally.from_cache
    return result


def map_figure(result: MapResult):
    """One panel per model, points coloured by label (:func:`tapt.analysis.plots.label_maps`)."""
    return plots.label_maps(result.coords, result.labels,
                            title=f"{result.method.upper()} of passage embeddings by "
                                  f"{result.field} (seed {result.seed})")
