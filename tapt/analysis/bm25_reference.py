"""The BM25 reference line of ``tapt report``: BM25 evaluated on the very dev sub-corpus a
``tapt train`` run evaluated on (the recipe's data and dev split, carved from train again as
the run carved it, ``dev_distractors`` and ``dev_seed``, through
:func:`tapt.retrieval.evaluate.evaluate`), or read from a ``tapt bm25 --output`` file that
must pair with the run's dev evaluation (:mod:`tapt.analysis.pairing`'s fields), with the
``tapt bm25`` command that makes one when it does not."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import SimpleNamespace

from tapt.analysis.pairing import WHOLE, DataKey, check_pair, data_key, unfingerprinted_note
from tapt.analysis.result_files import read_result
from tapt.data.beir import strictness
from tapt.data.fingerprint import files_digest, ids_digest
from tapt.data.relevance import choose_rule
from tapt.data.sources import load_data
from tapt.data.splits import splits_to_load, training_splits
from tapt.data.subcorpus import subcorpus_ids
from tapt.recipe import DataSettings, EvalSettings
from tapt.retrieval.bm25 import BM25Retriever
from tapt.retrieval.evaluate import evaluate
from tapt.retrieval.metrics import METRIC_KEYS

logger = logging.getLogger(__name__)


def _data_setting(recipe: dict, key: str):
    data = recipe.get("data") or {}
    if key in data:
        return data[key]
    field_info = DataSettings.model_fields[key]
    if field_info.is_required():
        raise ValueError(f"the run's recipe.yaml has no data.{key}")
    return field_info.get_default(call_default_factory=True)  # list keys: a new list


def dev_subcorpus(recipe: dict, recorded_carve: dict | None = None):
    """The run's dev data and sub-corpus ids, as the in-loop evaluator built them: under
    the recipe's relevance rule, and carved from train again when the run carved its dev
    split (``data.dev_from_train``: same decontamination, size, seed and carve, so the same
    queries: :func:`tapt.data.splits.training_splits`)."""
    data = SimpleNamespace(**{key: _data_setting(recipe, key) for key in (
        "train_split", "dev_split", "test_split", "dev_from_train", "dev_seed", "dev_carve",
        "decontaminate")})
    dataset = load_data(_data_setting(recipe, "path"), _data_setting(recipe, "config"),
                        splits_to_load(data, with_test=False),
                        revision=_data_setting(recipe, "revision"),
                        relevant_from=_data_setting(recipe, "relevant_from"),
                        **strictness(_data_setting(recipe, "lenient")))
    dataset = training_splits(dataset, data)
    check_same_carve(recorded_carve, dataset.carved)
    split = data.dev_split
    ids = subcorpus_ids(dataset, split, distractors=_data_setting(recipe, "dev_distractors"),
                        seed=data.dev_seed)
    return dataset, split, ids


def check_same_carve(recorded: dict | None, today: dict | None) -> None:
    """A ``ValueError`` when the dev split carved today is not the one the run recorded
    (``dev_carve`` of its ``results.json``; no record: nothing to check), so that a
    reference is never measured on other queries than the run's dev curve."""
    if recorded is None or today is None:
        return
    for key in ("carved_from", "split", "by", "ids_digest"):
        was, now = recorded.get(key), today.get(key)
        if was != now:
            raise ValueError(f"the dev split carved today differs from the run's (results.json "
                             f"dev_carve.{key}: {was!r}, today {now!r}): the data, its "
                             "decontamination or the carve changed since the run")


def bm25_on_dev(recipe: dict, recorded_carve: dict | None = None
                ) -> tuple[dict[str, float], str]:
    """BM25 on the run's dev sub-corpus (carved again: it must be the carve the run
    recorded); returns the metrics and a note saying so."""
    dataset, split, ids = dev_subcorpus(recipe, recorded_carve)
    report = evaluate(BM25Retriever(progress=False), dataset, split, corpus_ids=ids,
                      with_title=_data_setting(recipe, "with_title"))
    return report.metrics, (f"BM25 computed on the run's {split} sub-corpus ({len(ids):,} "
                            f"passages, {report.info['num_queries']:,} queries)")


def bm25_from_file(path: str | os.PathLike, recipe: dict | None = None, *,
                   relevance: dict | None = None) -> tuple[dict[str, float], str]:
    """The metrics of a ``tapt bm25 --output`` file and a note saying so; with the run's
    ``recipe`` (and the ``relevance`` rule it recorded), the file must have been evaluated
    on the run's dev data and settings (:func:`check_reference`)."""
    result = read_result(path)
    evaluated = result["evaluated"]
    if recipe is not None:
        check_reference(result, str(path), recipe, relevance=relevance)
    return {k: float(result[k]) for k in METRIC_KEYS}, (
        f"BM25 read from {path} ({evaluated.get('split')} split, "
        f"{evaluated.get('corpus_size', '?'):,} passages)"
        if isinstance(evaluated.get("corpus_size"), int) else f"BM25 read from {path}")


def check_reference(result: dict, source: str, recipe: dict, *,
                    relevance: dict | None = None) -> None:
    """A ``ValueError`` naming the field when a reference result was evaluated on other
    data or settings than the run's dev evaluation, in every field of
    :mod:`tapt.analysis.pairing`: the split, top-k (``eval.top_k``), the relevance rule
    (``relevance``, the one the run recorded, else the recipe's explicit
    ``data.relevant_from``), and, for a run on a local BEIR folder, the digests of that
    folder's corpus, queries and dev qrels and the dev sub-corpus (``dev_distractors``,
    ``dev_seed``). A field either side does not record is not checked; a result without a
    fingerprint is warned about."""
    split = _data_setting(recipe, "dev_split")
    grade = _data_setting(recipe, "relevant_from")
    if relevance is None and grade != "auto":
        relevance = choose_rule(grade).to_dict()
    top_k = (recipe.get("eval") or {}).get("top_k", EvalSettings.model_fields["top_k"].default)
    values: dict[str, object] = {"split": split, "top-k": top_k, "relevance": relevance}
    folder = Path(str(_data_setting(recipe, "path")))
    config = _data_setting(recipe, "config")
    if config and (folder / str(config)).is_dir():
        folder = folder / str(config)
    files = {"corpus": folder / "corpus.jsonl", "queries": folder / "queries.jsonl",
             "qrels": folder / "qrels" / f"{split}.tsv"}
    if all(path.is_file() for path in files.values()):
        values.update({name: files_digest([path]) for name, path in files.items()})
        dataset, _, ids = dev_subcorpus(recipe)
        values["sub-corpus"] = WHOLE if len(ids) == len(dataset.corpus) \
            else f"ids sha256 {ids_digest(ids)}"
    run = DataKey(source=f"the run's {split} data ({folder})", values=values,
                  fingerprinted=True)
    reference = data_key(result, source)
    check_pair(run, reference, fields=("split", "corpus", "queries", "qrels", "relevance",
                                       "top-k", "sub-corpus"),
               allowed=(), where="--bm25", liftable=False,
               remedy=f"a BM25 file that pairs: {pairing_bm25_command(recipe, relevance, top_k)}")
    note = unfingerprinted_note([reference])
    if note:
        logger.warning("%s", note)


def pairing_bm25_command(recipe: dict, relevance: dict | None, top_k: int) -> str:
    """The ``tapt bm25`` command line that evaluates BM25 as the run evaluated its dev set
    (data, split, dev sub-corpus, relevance rule, top-k); leaving out ``--bm25`` does the
    same inside ``tapt report``."""
    words = ["tapt bm25 --data", str(_data_setting(recipe, "path"))]
    config = _data_setting(recipe, "config")
    if config:
        words += ["--config", str(config)]
    words += ["--split", str(_data_setting(recipe, "dev_split"))]
    distractors = _data_setting(recipe, "dev_distractors")
    if distractors is not None:
        words += ["--distractors", str(distractors), "--seed",
                  str(_data_setting(recipe, "dev_seed"))]
    if relevance and "relevant_from" in relevance:
        words += ["--relevant-from", str(relevance["relevant_from"])]
    if top_k != 100:
        words += ["--top-k", str(top_k)]
    return (f"`{' '.join(words)} --output BM25.json` (or leave out --bm25 and tapt report "
            "computes it)")
