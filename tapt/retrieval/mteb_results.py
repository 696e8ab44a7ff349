"""MTEB's conventions through the ``mteb`` library (the ``tapt[mteb]`` extra).

- :func:`local_task`: an MTEB retrieval task (``mteb.AbsTaskRetrieval``) over a dataset tapt
  has loaded and validated (a local BEIR folder: :func:`folder_task`), so that
  ``mteb.evaluate(model, task, cache=None)`` runs MTEB's own encode, search and scoring on
  it with no Hub access. Its qrels are the split's positive grades as given (MTEB's
  convention: nDCG gains are the grades), or with ``relevance="binary"`` the grades tapt's
  relevance rule calls relevant, as 1. So MTEB's ``ndcg_at_10`` is tapt's
  ``graded_ndcg@10`` (and equals ``binary_ndcg@10`` on binary BEIR qrels), or, binary,
  tapt's ``binary_ndcg@10``.
- :func:`task_result_of_run`: MTEB's ``TaskResult`` of a ranking tapt made (``tapt eval
  --format mteb``): the run is handed to ``mteb.evaluate`` as a search model
  (:class:`RankingSearch`, mteb's ``SearchProtocol``), so MTEB scores it itself; only the
  cut-offs the run reaches (``k <= top_k``) are reported.
- :func:`write_task_result`: the result in MTEB's results layout,
  ``DIR/results/<model>/<revision>/<task>.json`` with ``model_meta.json`` beside it
  (``mteb.ResultCache.save_to_cache``), which ``mteb.ResultCache(DIR)`` loads back.

Without mteb every function raises :class:`MtebMissingError` (one line naming the extra).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from tapt.data.beir import BeirDataset, load_beir_folder, strictness
from tapt.retrieval.metrics import Run, trec_ranking
from tapt.util.ids import is_hub_id

MTEB_K_VALUES = (1, 3, 5, 10, 20, 100, 1000)
"""The cut-offs of MTEB's retrieval scores (``mteb.AbsTaskRetrieval.k_values``)."""
RELEVANCE = ("graded", "binary")


class MtebMissingError(ImportError, ValueError):
    """mteb is not installed (an ImportError; also a ValueError: one ``error:`` line)."""

    def __init__(self, what: str = "MTEB's result format") -> None:
        super().__init__(f'mteb is not installed; {what} needs it: pip install "tapt[mteb]"',
                         name="mteb")


def require_mteb(what: str = "MTEB's result format"):
    """The ``mteb`` module, or :class:`MtebMissingError` naming ``what`` needs it."""
    try:
        import mteb
    except ImportError:
        raise MtebMissingError(what) from None
    return mteb


@functools.cache
def _base_class():
    require_mteb("the MTEB task")
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    class LocalBeirRetrieval(AbsTaskRetrieval):
        """An MTEB retrieval task over data tapt loaded (``split_data``: one split)."""

        split_data: ClassVar[dict] = {}  # each task's subclass sets it (local_task)

        def load_data(self, num_proc: int | None = None, **kwargs) -> None:
            from datasets import Dataset

            data = self.split_data
            corpus = Dataset.from_dict({"id": data["corpus_ids"], "title": data["titles"],
                                        "text": data["texts"]})
            queries = Dataset.from_dict({"id": list(data["queries"]),
                                         "text": list(data["queries"].values())})
            self.dataset = {"default": {data["split"]: {
                "corpus": corpus, "queries": queries,
                "relevant_docs": {q: dict(docs) for q, docs in data["qrels"].items()},
                "top_ranked": None}}}
            self.data_loaded = True

    return LocalBeirRetrieval


def task_qrels(dataset: BeirDataset, split: str, relevance: str = "graded"
               ) -> dict[str, dict[str, int]]:
    """The split's qrels as the task holds them: positive grades as given (``graded``), or
    1 for each grade tapt's relevance rule calls relevant (``binary``); queries left with
    no judgment are left out (MTEB drops them too)."""
    if relevance not in RELEVANCE:
        raise ValueError(f"relevance must be one of {RELEVANCE}, got {relevance!r}")
    rule = dataset.rule
    kept = {}
    for query_id, docs in dataset.split(split).items():
        if relevance == "graded":
            judged = {doc: grade for doc, grade in docs.items() if grade > 0}
        else:
            judged = {doc: 1 for doc, grade in docs.items() if rule.is_relevant(grade)}
        if judged:
            kept[query_id] = judged
    return kept


def local_task(dataset: BeirDataset, split: str, *, name: str,
               corpus_ids: Sequence[str] | None = None, with_title: bool = True,
               relevance: str = "graded", k_values: Sequence[int] = MTEB_K_VALUES,
               revision: str | None = None, texts: bool = True):
    """An MTEB retrieval task named ``name`` over ``dataset``'s ``split`` (its judged
    queries) and ``corpus_ids`` (default: the whole corpus). ``with_title=False`` leaves
    titles out (MTEB joins ``title + " " + text``, as tapt does); ``texts=False`` gives the
    corpus ids only (for scoring a ranking already made)."""
    require_mteb("the MTEB task")
    from mteb.abstasks.task_metadata import TaskMetadata

    corpus_ids = list(dataset.corpus) if corpus_ids is None else list(corpus_ids)
    passages = [dataset.corpus[doc_id] for doc_id in corpus_ids] if texts else []
    qrels = task_qrels(dataset, split, relevance)
    metadata = TaskMetadata(
        name=name, description=f"BEIR data read by tapt from {Path(dataset.source).name}",
        reference=None, dataset={"path": dataset_path(dataset),
                                 "revision": revision or "local"},
        type="Retrieval", category="t2t", modalities=["text"], eval_splits=[split],
        eval_langs=["eng-Latn"], main_score="ndcg_at_10", date=None, domains=None,
        task_subtypes=None, license=None, annotations_creators=None, dialect=None,
        sample_creation=None, bibtex_citation=None)
    split_data = {
        "split": split, "corpus_ids": corpus_ids, "qrels": qrels,
        "titles": [p.title if with_title else "" for p in passages] if texts
        else [""] * len(corpus_ids),
        "texts": [p.text for p in passages] if texts else [""] * len(corpus_ids),
        "queries": {query_id: dataset.queries[query_id] for query_id in qrels}}
    task_class = type(f"Tapt{name.replace('-', '_')}", (_base_class(),),
                      {"metadata": metadata, "k_values": tuple(k_values),
                       "split_data": split_data})
    return task_class()


def dataset_path(dataset: BeirDataset) -> str:
    """The task's ``dataset.path``: a Hub id as is, a local folder by its name (no path of
    this machine goes into a result)."""
    source = str(dataset.source)
    return source if not Path(source).exists() else f"local/{Path(source).resolve().name}"


def folder_task(folder: str | os.PathLike, split: str = "test", *, name: str | None = None,
                lenient: bool = False, relevant_from: int | str = "auto",
                relevance: str = "graded", with_title: bool = True):
    """:func:`local_task` over a local BEIR folder, read and validated by tapt's loader
    (``lenient``: public BEIR sets, as ``tapt eval --lenient``)."""
    dataset = load_beir_folder(folder, [split], relevant_from=relevant_from,
                               **strictness(lenient))
    return local_task(dataset, split, name=name or Path(folder).resolve().name,
                      with_title=with_title, relevance=relevance)


def mteb_model_name(name: str) -> str:
    """An MTEB model name (``organization/model``) for what tapt evaluated: ``bm25`` as
    ``tapt/bm25s``, ``openai:MODEL`` as ``openai/MODEL``, a Hub id as is, a local folder as
    ``local/<folder name>`` (no path of this machine goes into a result)."""
    if name == "bm25":
        return "tapt/bm25s"
    if Path(name).exists():
        return f"local/{Path(name).resolve().name}"
    if ":" in name:
        provider, _, model = name.partition(":")
        return f"{provider}/{model.replace('/', '__')}"
    if is_hub_id(name):
        return name
    return f"local/{Path(name).name or name}"


class RankingSearch:
    """A ranking tapt made, as mteb's ``SearchProtocol``: ``search`` returns each query's
    passages of ``run`` (at most ``top_k``, in trec_eval's order); ``index`` keeps nothing."""

    def __init__(self, run: Run, model_name: str, revision: str | None = None) -> None:
        from mteb.models.model_meta import ModelMeta

        self.run = run
        self.mteb_model_meta = ModelMeta.create_empty(
            {"name": mteb_model_name(model_name), **({"revision": revision} if revision
                                                      else {})})

    def index(self, corpus, **kwargs) -> None:
        return None

    def search(self, queries, *, top_k: int, **kwargs) -> dict[str, dict[str, float]]:
        return {query_id: dict(trec_ranking(self.run.get(query_id, {}))[:top_k])
                for query_id in queries["id"]}


def task_result_of_run(run: Run, dataset: BeirDataset, split: str, *, model_name: str,
                       task_name: str, top_k: int, corpus_ids: Sequence[str] | None = None,
                       relevance: str = "graded", model_revision: str | None = None,
                       dataset_revision: str | None = None):
    """``(TaskResult, ModelMeta)``: MTEB's scores of ``run`` (tapt's top-``top_k`` ranking of
    ``corpus_ids`` for the split's queries), computed by ``mteb.evaluate``."""
    mteb = require_mteb()
    k_values = tuple(k for k in MTEB_K_VALUES if k <= top_k) or (top_k,)
    task = local_task(dataset, split, name=task_name, corpus_ids=corpus_ids,
                      relevance=relevance, k_values=k_values, texts=False,
                      revision=dataset_revision)
    search = RankingSearch(run, model_name, model_revision)
    result = mteb.evaluate(search, task, cache=None, show_progress_bar=False,
                           overwrite_strategy="always")
    return result.task_results[0], search.mteb_model_meta


def write_task_result(task_result, model_meta, folder: str | os.PathLike) -> Path:
    """Write ``task_result`` in MTEB's results layout under ``folder``
    (``mteb.ResultCache(folder).save_to_cache``); returns the task's JSON path."""
    mteb = require_mteb()
    cache = mteb.ResultCache(cache_path=folder)
    cache.save_to_cache(task_result, model_meta)
    return cache.get_task_result_path(task_result.task_name, model_meta)


def main_scores(task_result) -> Mapping[str, float]:
    """``{split: main_score}`` of a TaskResult (its one ``default`` subset per split)."""
    return {split: float(rows[0]["main_score"]) for split, rows in task_result.scores.items()}


MTEB_CARD_METRIC = "ndcg_at_10"
"""MTEB's main retrieval score; a card's MTEB-shaped entry carries tapt's
``graded_ndcg@10`` under it (the same number: gains are the grades, see the module)."""


def mteb_eval_results(splits: Mapping[str, Mapping[str, float]], *, dataset_type: str,
                      task_name: str, config: str | None = None,
                      revision: str | None = None) -> list:
    """Model-card ``model-index`` entries shaped as mteb writes them
    (``TaskResult.get_hf_eval_results``: task type ``text-retrieval``, task ``Retrieval``,
    dataset ``<task> (<subset>)``, metric ``ndcg_at_10``), one per split of ``splits``
    ({split: tapt metrics}); needs huggingface_hub, not mteb."""
    from huggingface_hub import EvalResult

    subset = config or "default"
    return [EvalResult(task_type="text-retrieval", task_name="Retrieval",
                       dataset_type=dataset_type, dataset_name=f"{task_name} ({subset})",
                       dataset_config=subset, dataset_split=split, dataset_revision=revision,
                       metric_type=MTEB_CARD_METRIC, metric_name=MTEB_CARD_METRIC,
                       metric_value=float(metrics["graded_ndcg@10"]))
            for split, metrics in splits.items() if "graded_ndcg@10" in metrics]
