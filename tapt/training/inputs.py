"""The inputs step of a TAPT run: everything the run consumes, read and checked once, before
the model loads and before anything of the run is written.

:func:`prepare_inputs` loads the recipe's splits (each file's digest taken as it is read),
decontaminates train and carves dev (:func:`load_recipe_data`), reads the guard set, the
mined negatives and the teacher's labels, builds the training rows (with their batch groups
and weak pairs) and the dev sub-corpus. What it returns, :class:`TrainingInputs`, is all the
rest of the run reads: after this step no phase goes back to :mod:`tapt.data`
(``tests/test_import_layers.py`` holds it). Every error here names the file, the line and
the field, and leaves the run folder as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tapt.data.beir import BeirDataset, DataError, strictness
from tapt.data.fingerprint import remember_digests
from tapt.data.labels import read_labels
from tapt.data.mined import read_mined
from tapt.data.pseudo_rows import pseudo_rows_dataset, read_pseudo_file
from tapt.data.sources import load_data
from tapt.data.splits import check_no_split_file, splits_to_load, training_splits
from tapt.data.subcorpus import subcorpus_ids
from tapt.data.triplets import build_training_rows
from tapt.data.weak_pairs import beside_labelled, weak_pairs_for, with_weak_pairs
from tapt.recipe import Recipe
from tapt.run_folder.split_records import data_records
from tapt.training.distill import labeler_for
from tapt.training.guard_data import GuardSet, load_guard_set

logger = logging.getLogger(__name__)


@dataclass
class TrainingInputs:
    """What a TAPT run reads after its inputs step (:func:`prepare_inputs`)."""

    dataset: BeirDataset
    """The loaded splits: dev and test are evaluated on it, train's rows came from it."""
    train_rows: Any
    """The training rows, a ``datasets.Dataset`` (columns ``query``, ``positive``,
    ``negative``..., ``label`` for distillation)."""
    groups: list[str] | None
    """Each row's batch group (``data.batch_by``), None for ``none``."""
    dev_ids: list[str] | None
    """The dev sub-corpus (``data.dev_distractors``); None: the whole corpus."""
    guard_set: GuardSet | None
    """The guard set: ``eval.guard_data``'s split and sub-corpus, None without it."""
    query_ids: dict[str, str]
    """Train query text -> id(s) (``|``-joined when texts repeat), for the non-finite guard's
    naming of the rows of a bad step."""
    relevance: dict = field(default_factory=dict)
    """The relevance rule the qrels were read under (results.json)."""
    records: dict[str, dict] = field(default_factory=dict)
    """``dev_carve`` and ``decontaminated`` (results.json, the card), those made."""
    weak_pairs: dict | None = None
    """The weak pairs' record (results.json, the card), None when none are mixed in."""
    pseudo_queries: dict | None = None
    """The pseudo-query rows' record (results.json, the card), None when none are used."""

    @property
    def result_records(self) -> dict:
        """What results.json records of the data (:attr:`RunResults.data
        <tapt.run_folder.records.RunResults.data>`): ``relevance``, then the records made."""
        return {"relevance": self.relevance, **self.records,
                **({"pseudo_queries": self.pseudo_queries} if self.pseudo_queries else {}),
                **({"weak_pairs": self.weak_pairs} if self.weak_pairs else {})}

    @property
    def columns(self) -> list[str]:
        """Every column of the training rows (a ``DatasetDict``'s: of all its datasets)."""
        names = self.train_rows.column_names
        if isinstance(names, dict):
            return list(dict.fromkeys(name for columns in names.values() for name in columns))
        return list(names)


def prepare_inputs(recipe: Recipe, *, with_test: bool, scratch: Path | None = None
                   ) -> TrainingInputs:
    """Read and check everything the run consumes (module docstring); ``scratch``: a folder
    that outlives training, for the weak pairs' Arrow files (needed with
    ``data.weak_pairs``)."""
    data = recipe.data
    dataset = load_recipe_data(recipe, with_test=with_test)
    guard_set = load_guard_set(recipe.eval, recipe.data.dev_seed)  # before the model loads
    mined = read_mined(data.mined_negatives, dataset, data.train_split,
                       with_title=data.with_title) if data.mined_negatives else None
    grouping = group_of(dataset, data.batch_by)
    rows = build_training_rows(dataset, data.train_split, soft_negative=data.soft_negative,
                               missing=data.missing_hard_negative, with_title=data.with_title,
                               mined=mined, mined_per_row=data.negatives_per_query,
                               group_of=grouping,  # margin_mse / distill_kl: targets
                               labels=labeler_for(recipe.loss, dataset, data.train_split,
                                                  data.mined_negatives))
    rows, groups = rows if grouping is not None else (rows, None)
    weak_record = None
    if data.weak_pairs != "none":  # passages alone: tapt.data.weak_pairs
        if scratch is None:
            raise RuntimeError("data.weak_pairs needs a scratch folder (train makes one)")
        pairs, weak_record = weak_pairs_for(dataset, data.weak_pairs, folder=scratch,
                                            count=data.weak_pairs_max, seed=data.weak_pairs_seed)
        rows = with_weak_pairs(rows, pairs)
    pseudo_record = None
    if data.pseudo_queries is not None:  # a tapt pseudo file: tapt.data.pseudo_rows
        if scratch is None:
            raise RuntimeError("data.pseudo_queries needs a scratch folder (train makes one)")
        rows, pseudo_record = with_pseudo_rows(recipe, dataset, rows, folder=scratch)
    dev_ids = subcorpus_ids(dataset, data.dev_split, distractors=data.dev_distractors,
                            seed=data.dev_seed)
    return TrainingInputs(dataset=dataset, train_rows=rows, groups=groups, dev_ids=dev_ids,
                          guard_set=guard_set, query_ids=query_ids_by_text(dataset, data.train_split),
                          relevance=dataset.rule.to_dict(), records=data_records(dataset),
                          weak_pairs=weak_record, pseudo_queries=pseudo_record)


PSEUDO_LABELS = {"margin_mse": "margins", "clear": "margins", "distill_kl": "scores"}
"""The label column pseudo-query rows carry for each loss that reads one."""


def with_pseudo_rows(recipe: Recipe, dataset: BeirDataset, rows, *, folder: Path):
    """``(rows, record)``: the ``data.pseudo_queries`` rows beside the labelled ``rows``
    (their own dataset: a batch never mixes the two), or alone with ``data.pseudo_mix:
    only`` (the recipe refuses ``data.batch_by`` with them, so there are no batch groups:
    pseudo-query rows have none)."""
    data = recipe.data
    file = read_pseudo_file(data.pseudo_queries, dataset)
    pseudo, record = pseudo_rows_dataset(
        file, dataset, folder=folder, passages=data.pseudo_passages,
        negatives=data.pseudo_negatives, maximum=data.pseudo_max, seed=data.pseudo_seed,
        label=PSEUDO_LABELS.get(recipe.loss.name, "none"), with_title=data.with_title)
    record["mix"] = data.pseudo_mix
    logger.info("pseudo-queries (%s, teacher %s): %d rows (%d in the file, %d left out "
                "touching passages training must not see, %d with too few negatives); "
                "%d corpus passages read, %d of them held out, %d dev", data.pseudo_mix,
                record["teacher"], record["rows"], record["rows_in_file"],
                record["left_out_touching_unseen"], record["left_out_short_negatives"],
                record["passages_read"], record["held_out_passages_read"],
                record["dev_passages_read"])
    if data.pseudo_mix == "only":
        return pseudo, record
    return beside_labelled(rows, "pseudo_queries", pseudo), record


def load_recipe_data(recipe: Recipe, with_test: bool) -> BeirDataset:
    """The recipe's splits under its relevance rule; a query also judged in any other qrels
    file (the test split included when it is not loaded) is an error. Train is
    decontaminated against ``data.decontaminate``, and with ``data.dev_from_train`` the dev
    split is carved from what is left (:func:`tapt.data.splits.training_splits`)."""
    data = recipe.data
    if data.dev_from_train is not None:
        check_no_split_file(data.path, data.config, data.dev_split)
    dataset = load_data(data.path, data.config, splits_to_load(data, with_test),
                        revision=data.revision, relevant_from=data.relevant_from,
                        leaks="error", **strictness(data.lenient))
    dataset = training_splits(dataset, data, keep=(data.test_split,) if with_test else ())
    log_split_record(dataset)
    if with_test:  # test.json's data fingerprint: the files as read now, not after training
        remember_digests(dataset, [data.test_split])
    return dataset


def log_split_record(dataset: BeirDataset) -> None:
    """One log line each for the decontamination and the dev carve (also in results.json)."""
    if (record := dataset.decontaminated):
        logger.info("train decontaminated against %s: %d -> %d queries, %d -> %d judgments "
                    "(%d passages held out)", ", ".join(record["against"]),
                    *record["train_queries"], *record["judgments"], record["passages"])
    if (carve := dataset.carved):
        logger.info("dev carved from %s by %s: %d queries in %d groups, seed %d; %d dev "
                    "queries have a relevant passage that a training query has as a positive",
                    carve["carved_from"], carve["by"], carve["queries"], carve["groups"],
                    carve["seed"], carve["overlap"])


def group_of(dataset: BeirDataset, batch_by: str) -> Callable[[str], str] | None:
    """Anchor passage id -> group key for ``data.batch_by`` (None for ``none``): ``title``
    is the passage's title (its patent in FormBench; an untitled passage is a group of its
    own), ``label:FIELD`` its ``labels.FIELD`` in the local corpus.jsonl (a passage without
    the label is a group of its own). The batches: :mod:`tapt.training.grouped_batches`."""
    if batch_by == "none":
        return None
    if batch_by == "title":
        return lambda doc_id: dataset.corpus[doc_id].title or f"untitled:{doc_id}"
    field_name = batch_by.split(":", 1)[1]
    folder = Path(dataset.source)
    if not (folder / "corpus.jsonl").is_file():
        raise DataError(dataset.source, f"data.batch_by: {batch_by} reads labels from a local "
                                        "corpus.jsonl, and this dataset has none")
    labels = read_labels(folder, [field_name])[field_name]
    return lambda doc_id: labels.get(doc_id, f"unlabelled:{doc_id}")


def query_ids_by_text(dataset: BeirDataset, split: str) -> dict[str, str]:
    """Query text -> id(s) for the split (ids joined with '|' when texts repeat)."""
    ids: dict[str, str] = {}
    for query_id in dataset.split(split):
        text = dataset.queries[query_id]
        ids[text] = f"{ids[text]}|{query_id}" if text in ids else query_id
    return ids
