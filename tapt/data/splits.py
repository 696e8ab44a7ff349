"""A dev split carved from train, for BEIR sets that ship none (SciFact, NFCorpus, FiQA's
train/test releases, most users' own data).

By default the carve takes whole **groups** of train queries: queries that share a relevant
passage, directly or through other queries (:func:`tapt.data.overlap.relevance_groups`), go
to dev together or stay in train together. So no dev query has a relevant passage that a
training query has as a positive, and dev, like a user's new documents (and FormBench's
patent split), measures passages the model never trained on. Carving single queries
(``by="query"``, ``data.dev_carve: query``) leaves most dev queries' passages in training
where passages are shared (SciFact), and dev then rewards memorising them: it is kept for
comparison with older runs, with a warning.

Nothing is written: the carve is applied to the loaded :class:`~tapt.data.beir.BeirDataset`,
and the dataset folder is never touched (``tapt data split`` writes it as a new folder when
another tool needs it).

The choice depends only on the query ids and the seed: each group is ranked by a keyed
BLAKE2b digest of ``seed`` and its first query id, and groups are taken in that order while
they fit in the size asked for (a group that would overshoot it is passed over for smaller
ones). So the same (ids, judgments, seed, size) give the same split on any machine and in
any file order.

Example::

    from tapt.data.sources import load_data
    from tapt.data.splits import carve_dev

    data = carve_dev(load_data("../shared/data/scifact", splits=["train", "test"]),
                     size=100, seed=0)
    len(data.split("dev")), data.carved["groups"], data.carved["overlap"]   # (100, .., 0)
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from tapt.data.beir import BeirDataset, DataError, Qrels
from tapt.data.overlap import decontaminate, positives, relevance_groups, split_overlap

logger = logging.getLogger(__name__)

CarveBy = Literal["group", "query"]
QUERY_CARVE_WARNING = (
    "the dev split is carved by single query (data.dev_carve: query): a dev query's "
    "relevant passage can still be a training positive, so dev rewards memorising training "
    "passages and can pick a model that is worse on new documents; the default, "
    "data.dev_carve: group, keeps dev's passages out of training")


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
    by: CarveBy = "group"
    groups: int = 0
    """Groups of queries carved (each query its own group when carving by query)."""
    overlap: int = 0
    """Dev queries with a relevant passage that is a positive of a remaining train query
    (0 for a group carve)."""

    def to_dict(self) -> dict:
        return {"carved_from": self.source_split, "split": self.split, "seed": self.seed,
                "queries": self.queries, "remaining_train_queries": self.remaining,
                "ids_digest": self.ids_digest, "by": self.by, "groups": self.groups,
                "overlap": self.overlap}


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


def ranked_groups(groups: list[list[str]], seed: int) -> list[list[str]]:
    """``groups`` in the seeded order the carve takes them: by their first query id's rank
    (:func:`ranked_query_ids`)."""
    order = {query_id: position for position, query_id
             in enumerate(ranked_query_ids([group[0] for group in groups], seed))}
    return sorted(groups, key=lambda group: order[group[0]])


def take_groups(groups: list[list[str]], count: int) -> list[list[str]]:
    """Groups, in order, while they fit in ``count`` queries (a group that would overshoot
    is passed over, and smaller ones after it still taken), until ``count`` is reached."""
    taken, total = [], 0
    for group in groups:
        if total + len(group) <= count:
            taken.append(group)
            total += len(group)
            if total == count:
                break
    return taken


def without_passages(qrels: Qrels, passages: frozenset[str] | set[str]) -> Qrels:
    """``qrels`` without the judgments of ``passages`` (a query left with none is dropped;
    only negatives can go here: the groups keep dev's positives out of train's positives)."""
    kept = {q: {d: g for d, g in docs.items() if d not in passages} for q, docs in qrels.items()}
    dropped = sum(map(len, qrels.values())) - sum(map(len, kept.values()))
    if dropped:
        logger.info("dev carve: %d train judgments of passages relevant in dev left out "
                    "(negatives: training never sees dev's passages)", dropped)
    return {q: docs for q, docs in kept.items() if docs}


def carve_dev(dataset: BeirDataset, *, size: float, seed: int = 0,
              source_split: str = "train", split: str = "dev",
              by: CarveBy = "group") -> BeirDataset:
    """A copy of ``dataset`` whose ``split`` holds ``size`` queries (a count, or a fraction
    of the eligible ones) carved from ``source_split``, which keeps the rest; its ``carved``
    holds the :class:`CarvedSplit` record as a dict.

    ``by="group"`` (default) carves whole groups of queries that share relevant passages
    (see the module docstring), so that no dev query has a relevant passage that a train
    query has as a positive; the count is reached exactly when small groups allow it (else
    it is the closest below). ``by="query"`` carves single queries, with a warning.

    Only queries with at least one relevant passage under the dataset's relevance rule are
    eligible (a dev query without one scores nothing); the others stay in train. Raises
    :class:`~tapt.data.beir.DataError` if ``split`` is already loaded, or if the carve
    would leave no train query."""
    if by not in ("group", "query"):
        raise ValueError(f"carve by 'group' or 'query', got {by!r}")
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
    if by == "query":
        logger.warning(QUERY_CARVE_WARNING)
        groups = [[query_id] for query_id in eligible]
    else:
        groups = relevance_groups(source, dataset.rule, eligible)
    taken = take_groups(ranked_groups(groups, seed), count)
    chosen = {query_id for group in taken for query_id in group}
    if not chosen:
        raise DataError(dataset.split_file(source_split),
                        f"dev carve: every group of queries sharing relevant passages is "
                        f"larger than the {count} dev queries asked for; ask for more")
    qrels = dict(dataset.qrels)
    qrels[source_split] = {q: docs for q, docs in source.items() if q not in chosen}
    qrels[split] = {q: docs for q, docs in source.items() if q in chosen}
    if by == "group":  # a train query's graded negative may still be a dev positive
        qrels[source_split] = without_passages(qrels[source_split],
                                               positives(qrels[split], dataset.rule))
    seen = split_overlap(replace(dataset, qrels=qrels), split, source_split).seen
    origin = dataset.split_file(source_split)
    files = {**dataset.files, split: f"{origin} (dev carved by {by}: {len(chosen)} queries, "
                                     f"seed {seed})"}
    record = CarvedSplit(source_split, split, seed, len(chosen), len(qrels[source_split]),
                         ids_digest(chosen), by, len(taken), len(seen))
    if len(chosen) < count:
        logger.info("dev carve: %d queries in %d groups (asked for %d: no group small enough "
                    "to fill the rest)", len(chosen), len(taken), count)
    return replace(dataset, qrels=qrels, files=files, carved=record.to_dict())


def splits_to_load(data, with_test: bool) -> list[str]:
    """The qrels splits a recipe's ``data`` section (a
    :class:`~tapt.recipe.schema.DataSettings`) needs loaded: train, dev unless it is carved,
    test with ``with_test``, and the splits training is decontaminated against."""
    carve = data.dev_from_train is not None
    splits = [data.train_split] + ([] if carve else [data.dev_split])
    splits += [data.test_split] if with_test else []
    return list(dict.fromkeys([*splits, *getattr(data, "decontaminate", [])]))


def training_splits(dataset: BeirDataset, data, keep: tuple[str, ...] = ()) -> BeirDataset:
    """The recipe's view of ``dataset`` (loaded with :func:`splits_to_load`): train
    decontaminated against ``data.decontaminate`` first
    (:func:`tapt.data.overlap.decontaminate`; those splits are then dropped unless in
    ``keep``; a dataset's own dev split, named there to keep dev passage-disjoint from
    train, stays: the run selects its checkpoint on it), then dev carved from what is left
    (``data.dev_from_train``, by ``data.dev_carve``). Every reader of a run's dev set
    (training, soups, merges, reports) goes through this, so all see the same queries."""
    against = list(getattr(data, "decontaminate", []) or [])
    if against:
        if data.dev_from_train is None:
            keep = (*keep, data.dev_split)
        dataset = decontaminate(dataset, against, train_split=data.train_split, keep=keep)
    if data.dev_from_train is not None:
        dataset = carve_dev(dataset, size=data.dev_from_train, seed=data.dev_seed,
                            source_split=data.train_split, split=data.dev_split,
                            by=getattr(data, "dev_carve", "group"))
    return dataset


def decontamination_problem(data, decontaminate: str = "data.decontaminate",
                            dev_from_train: str = "data.dev_from_train") -> str | None:
    """What is wrong with ``data``'s splits to decontaminate against (``data``: a recipe's
    :class:`~tapt.recipe.schema.DataSettings` or ``tapt data stats``' flags as such;
    ``decontaminate`` / ``dev_from_train``: what the message calls the two), or None: it
    names the train split itself, or a dev split carved from train."""
    if data.train_split in data.decontaminate:
        return (f"{decontaminate} names the train split '{data.train_split}': it would drop "
                "every training judgment")
    if data.dev_from_train is not None and data.dev_split in data.decontaminate:
        return (f"{decontaminate} names '{data.dev_split}', which is carved from train "
                f"({dev_from_train}): the group carve already keeps its relevant passages "
                "out of training")
    return None


def carved_off(dataset: BeirDataset, split: str) -> dict:
    """The qrels of the queries carved off ``split`` into a dev split (empty when nothing
    was): files made for the whole split (``tapt mine``, ``tapt score``) hold their lines,
    which readers skip rather than refuse."""
    carve = dataset.carved or {}
    if carve.get("carved_from") != split:
        return {}
    return dataset.qrels.get(carve.get("split"), {})


def dev_passages(dataset: BeirDataset, split: str) -> frozenset[str]:
    """The relevant passages of the dev split carved off ``split`` (empty when none was):
    a group carve keeps them out of ``split``'s positives, and training keeps them out of
    its negatives and weak pairs too, so dev measures passages training never saw."""
    carved = carved_off(dataset, split)
    return frozenset(positives(carved, dataset.rule)) if carved else frozenset()


def check_no_split_file(path: str, config: str | None, split: str) -> None:
    """Refuse a carve where the local folder has ``qrels/<split>.tsv`` of its own: the
    dataset's dev split would be ignored silently (a Hub dataset is not looked at)."""
    folder = Path(path) / config if config and (Path(path) / config).is_dir() else Path(path)
    own = folder / "qrels" / f"{split}.tsv"
    if own.is_file():
        raise DataError(own, f"data.dev_from_train carves a '{split}' split, but the dataset "
                             f"has its own: use it (remove data.dev_from_train) or carve "
                             "into another data.dev_split name")
