"""A dev split carved from train, for BEIR sets that ship none (SciFact, NFCorpus, FiQA's
train/test releases, most users' own data).

The carve is by query: a seeded share of the train queries that have a relevant passage
becomes the dev split, the rest stay train, so no query is in two splits (a passage may
stay judged in both, as across BEIR's own splits). Nothing is written: the carve is
applied to the loaded :class:`~tapt.data.beir.BeirDataset`, and the dataset folder is
never touched (``tapt data split`` writes it as a new folder when another tool needs it).

The choice depends only on the query ids and the seed: each id is ranked by a keyed
BLAKE2b digest of ``seed`` and the id, and the lowest ranks are taken. So the same
(ids, seed, size) always give the same split on any machine and in any file order, and a
larger carve contains every smaller one of the same seed.

Example::

    from tapt.data.sources import load_data
    from tapt.data.splits import carve_dev

    data = carve_dev(load_data("../shared/data/scifact", splits=["train", "test"]),
                     size=100, seed=0)
    len(data.split("dev")), len(data.split("train"))   # (100, 709)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from tapt.data.beir import BeirDataset, DataError


@dataclass(frozen=True)
class CarvedSplit:
    """What was carved: recorded in a run's results so the split can be rebuilt."""

    source_split: str
    split: str
    seed: int
    queries: int
    remaining: int
    ids_digest: str
    """BLAKE2b of the sorted dev query ids, one per line (which queries, checkably)."""

    def to_dict(self) -> dict:
        return {"carved_from": self.source_split, "split": self.split, "seed": self.seed,
                "queries": self.queries, "remaining_train_queries": self.remaining,
                "ids_digest": self.ids_digest}


def carve_size(size: float, available: int) -> int:
    """Queries to carve: ``size`` itself when a whole number, else that fraction of
    ``available`` (rounded, at least 1). Raises ValueError when nothing would be left to
    train on."""
    if isinstance(size, bool):
        raise ValueError("expected a number of queries or a fraction, got a boolean")  # noqa: TRY004
    count = size if isinstance(size, int) else max(1, round(size * available))
    if isinstance(size, float) and not 0.0 < size < 1.0:
        raise ValueError(f"a fraction must be in (0, 1), got {size}")
    if count < 1:
        raise ValueError(f"must be at least 1 query, got {size}")
    if count >= available:
        raise ValueError(f"{count} dev queries would leave none of the {available} train "
                         "queries with a relevant passage to train on")
    return count


def ranked_query_ids(query_ids, seed: int) -> list[str]:
    """``query_ids`` in the seeded order the carve takes them (see the module docstring)."""
    key = str(seed).encode()

    def rank(query_id: str) -> tuple[bytes, str]:
        digest = hashlib.blake2b(query_id.encode("utf-8"), key=key, digest_size=16)
        return digest.digest(), query_id

    return sorted(query_ids, key=rank)


def ids_digest(query_ids) -> str:
    """A digest of a set of query ids (sorted, one per line)."""
    text = "".join(f"{query_id}\n" for query_id in sorted(query_ids))
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def carve_dev(dataset: BeirDataset, *, size: float, seed: int = 0,
              source_split: str = "train", split: str = "dev") -> BeirDataset:
    """A copy of ``dataset`` whose ``split`` holds ``size`` queries (a count, or a fraction
    of the eligible ones) carved from ``source_split``, which keeps the rest; its ``carved``
    holds the :class:`CarvedSplit` record as a dict.

    Only queries with at least one relevant passage under the dataset's relevance rule are
    eligible (a dev query without one scores nothing); the others stay in train. Raises
    :class:`~tapt.data.beir.DataError` if ``split`` is already loaded, or if the carve
    would leave no train query."""
    if split in dataset.qrels:
        raise DataError(dataset.split_file(split),
                        f"the dataset already has a '{split}' split; carve a dev split only "
                        "from data that has none (or give the carve another split name)")
    source = dataset.split(source_split)
    eligible = [query_id for query_id, docs in source.items()
                if any(dataset.rule.is_relevant(grade) for grade in docs.values())]
    try:
        count = carve_size(size, len(eligible))
    except ValueError as err:
        raise DataError(dataset.split_file(source_split), f"dev carve: {err}") from None
    chosen = set(ranked_query_ids(eligible, seed)[:count])
    qrels = dict(dataset.qrels)
    qrels[source_split] = {q: docs for q, docs in source.items() if q not in chosen}
    qrels[split] = {q: docs for q, docs in source.items() if q in chosen}
    origin = dataset.split_file(source_split)
    files = {**dataset.files, split: f"{origin} (dev carved: {count} queries, seed {seed})"}
    record = CarvedSplit(source_split, split, seed, count, len(qrels[source_split]),
                         ids_digest(chosen))
    return replace(dataset, qrels=qrels, files=files, carved=record.to_dict())


def carved_off(dataset: BeirDataset, split: str) -> dict:
    """The qrels of the queries carved off ``split`` into a dev split (empty when nothing
    was): files made for the whole split (``tapt mine``, ``tapt score``) hold their lines,
    which readers skip rather than refuse."""
    carve = dataset.carved or {}
    if carve.get("carved_from") != split:
        return {}
    return dataset.qrels.get(carve.get("split"), {})


def check_no_split_file(path: str, config: str | None, split: str) -> None:
    """Refuse a carve where the local folder has ``qrels/<split>.tsv`` of its own: the
    dataset's dev split would be ignored silently (a Hub dataset is not looked at)."""
    folder = Path(path) / config if config and (Path(path) / config).is_dir() else Path(path)
    own = folder / "qrels" / f"{split}.tsv"
    if own.is_file():
        raise DataError(own, f"data.dev_from_train carves a '{split}' split, but the dataset "
                             f"has its own: use it (remove data.dev_from_train) or carve "
                             "into another data.dev_split name")
