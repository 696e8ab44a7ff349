"""Classification and clustering probes on frozen passage embeddings (FormBench §6.2).

FormBench found a retrieval-classification inversion: API models that fail at retrieval
lead CPC classification and clustering, and TAPT, which lifts retrieval, does not help
there. These probes measure the same on any label field of a corpus:

- classification: logistic regression (scikit-learn; L2-normalised embeddings,
  standardised on the training part) trained on a fixed, stratified, seeded split of the
  labelled passages; accuracy and macro-F1 on the held-out part;
- clustering: k-means with as many clusters as classes (seeded); V-measure against the
  labels.

Labels come from ``corpus.jsonl``: ``"labels": {"domain": ..., "class": ...}`` as
``tapt data synth`` writes them (or a top-level field of that name). Every model sees the
same passages and the same split, so rows compare.

Example::

    labels = read_labels("data/quickstart", ["domain", "class"])
    result = run_probes({"base": base_encoder, "tapt": tapt_encoder}, dataset, labels)
    result.scores["tapt"]["domain"]["macro_f1"]
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tapt.analysis import plots
from tapt.analysis.embed import embed, materialized, unit_rows
from tapt.data.arrow_corpus import corpus_texts as passage_texts
from tapt.data.beir import BeirDataset
from tapt.data.labels import read_labels  # noqa: F401 (moved there; importable here)
from tapt.encoders.base import Encoder
from tapt.retrieval.dense import EncodingTally
from tapt.util.bounds import OPEN_FRACTION, POSITIVE_INT, SEED, check_optional

# scikit-learn (the probes) and rich (the table) are imported where used: importing
# tapt.analysis must not import them.

PROBE_METRICS = ("accuracy", "macro_f1", "v_measure")


def probe_passages(labels: Mapping[str, Mapping[str, str]], corpus_ids: Sequence[str], *,
                   max_passages: int | None = None, seed: int = 0) -> list[str]:
    """The passages to embed: those with any label, in corpus order, at most
    ``max_passages`` of them (a seeded sample)."""
    labelled = set().union(*(set(found) for found in labels.values()))
    ids = [doc_id for doc_id in corpus_ids if doc_id in labelled]
    if max_passages is not None and len(ids) > max_passages:
        keep = set(random.Random(seed).sample(ids, max_passages))
        ids = [doc_id for doc_id in ids if doc_id in keep]
    return ids


def fixed_split(ids: Sequence[str], labels: Mapping[str, str], *, test_size: float = 0.3,
                seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Stratified train/test positions into ``ids`` (those labelled, in classes of at least
    two passages), the same for every model; returns ``(train, test, dropped classes)``."""
    from sklearn.model_selection import train_test_split

    test_size = OPEN_FRACTION.check(test_size, "test_size")
    counts = Counter(labels[d] for d in ids if d in labels)
    dropped = sorted(c for c, n in counts.items() if n < 2)
    positions = np.array([i for i, d in enumerate(ids) if d in labels
                          and counts[labels[d]] >= 2], dtype=np.int64)
    y = [labels[ids[i]] for i in positions]
    if len(set(y)) < 2:
        raise ValueError(f"the probe needs at least two classes with two passages each, got "
                         f"{len(set(y))}")
    test_count = max(len(set(y)), round(test_size * len(y)))
    if len(y) - test_count < len(set(y)):
        raise ValueError(f"{len(y)} passages are too few for a stratified split of "
                         f"{len(set(y))} classes")
    train, test = train_test_split(positions, test_size=test_count, random_state=seed,
                                   stratify=y)
    return np.sort(train), np.sort(test), dropped


def classify(x: np.ndarray, y: Sequence[str], train: np.ndarray, test: np.ndarray,
             seed: int = 0) -> dict[str, float]:
    """Logistic regression on ``x[train]`` (features standardised on the training part, so
    a crowded, anisotropic embedding space is not penalised by the regulariser alone);
    accuracy and macro-F1 on ``x[test]``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    y = np.asarray(y)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000,
                                                               random_state=seed))
    model.fit(x[train], y[train])
    predicted = model.predict(x[test])
    return {"accuracy": float(accuracy_score(y[test], predicted)),
            "macro_f1": float(f1_score(y[test], predicted, average="macro"))}


def cluster(x: np.ndarray, y: Sequence[str], seed: int = 0) -> dict[str, float]:
    """k-means with one cluster per class; V-measure of the clusters against ``y``."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import v_measure_score

    k = len(set(y))
    clusters = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(x)
    return {"v_measure": float(v_measure_score(list(y), clusters))}


@dataclass
class ProbeResult:
    fields: list[str]
    passages: int
    seed: int
    test_size: float
    scores: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    """``scores[model][field]``: accuracy, macro_f1, v_measure, passages, classes."""
    dropped: dict[str, list[str]] = field(default_factory=dict)
    """Classes left out of the classification split (fewer than two passages)."""
    corpus_from_cache: dict[str, int] = field(default_factory=dict)
    """Per model, the passages read from the embedding cache instead of encoded."""

    def to_dict(self) -> dict:
        return {"fields": self.fields, "passages": self.passages, "seed": self.seed,
                "test_size": self.test_size, "models": self.scores,
                "dropped_classes": self.dropped, "corpus_from_cache": self.corpus_from_cache}


def run_probes(encoders: Mapping[str, Encoder], dataset: BeirDataset,
               labels: Mapping[str, Mapping[str, str]], *, test_size: float = 0.3,
               seed: int = 0, max_passages: int | None = None, batch_size: int = 32,
               with_title: bool = True, on_model=None,
               cache_dir: str | None = None) -> ProbeResult:
    """Embed the labelled passages once per model and probe every label field.

    ``encoders`` maps a name to an encoder or a zero-argument loader of one (called when
    its turn comes); ``cache_dir``: the passages go through the embedding cache there, as
    ``tapt eval``'s do."""
    OPEN_FRACTION.check(test_size, "test_size")
    SEED.check(seed, "seed")
    check_optional(POSITIVE_INT, max_passages, "max_passages")
    POSITIVE_INT.check(batch_size, "batch_size")
    ids = probe_passages(labels, list(dataset.corpus), max_passages=max_passages, seed=seed)
    if not ids:
        raise ValueError("no labelled passage of the labels is in the corpus")
    splits = {name: fixed_split(ids, found, test_size=test_size, seed=seed)
              for name, found in labels.items()}
    result = ProbeResult(fields=list(labels), passages=len(ids), seed=seed, test_size=test_size,
                         dropped={name: split[2] for name, split in splits.items()})
    texts = passage_texts(dataset.corpus, ids, with_title)  # lazy for Arrow
    for model_name, encoder in encoders.items():
        if on_model is not None:
            on_model(model_name)
        tally = EncodingTally()
        with materialized(encoder) as encoder:  # a loaded encoder is closed once embedded
            x = unit_rows(embed(encoder, texts, "document", ids=ids, batch_size=batch_size,
                                cache_dir=cache_dir, tally=tally))
        result.corpus_from_cache[model_name] = tally.from_cache
        result.scores[model_name] = {}
        for name, found in labels.items():
            train, test, _ = splits[name]
            y_all = [found.get(d, "") for d in ids]
            scores = classify(x, y_all, train, test, seed)
            labelled = np.array([i for i, d in enumerate(ids) if d in found], dtype=np.int64)
            scores |= cluster(x[labelled], [y_all[i] for i in labelled], seed)
            scores |= {"passages": len(labelled),
                       "classes": len({y_all[i] for i in labelled})}
            result.scores[model_name][name] = scores
    return result


def probe_table(result: ProbeResult):
    """A rich table: model x label field x (accuracy, macro-F1, V-measure)."""
    from rich.table import Table

    table = Table(title=f"Probes on frozen embeddings ({result.passages:,} passages, "
                        f"{result.test_size:.0%} held out, seed {result.seed})")
    for column in ("model", "labels", "classes", "accuracy", "macro-F1", "V-measure"):
        table.add_column(column, justify="left" if column in ("model", "labels") else "right")
    for model, by_field in result.scores.items():
        for index, (name, scores) in enumerate(by_field.items()):
            table.add_row(model if index == 0 else "", name, f"{scores['classes']:,}",
                          f"{scores['accuracy']:.4f}", f"{scores['macro_f1']:.4f}",
                          f"{scores['v_measure']:.4f}", end_section=index == len(by_field) - 1)
    return table


def probe_figure(result: ProbeResult):
    return plots.grouped_bars(result.scores, PROBE_METRICS, title="probes")
