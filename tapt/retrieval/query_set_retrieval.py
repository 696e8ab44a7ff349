"""Several query sets against one corpus encoding (``tapt eval --queries NAME=FILE``).

The split's own queries and every alternative set go through ONE ``retrieve`` call: the
corpus is encoded (or read from the cache) and indexed once, and each query is ranked on
its own, so a query's ranking is the one a separate evaluation of its set would give. The
sets are told apart inside that call by a prefix on the query ids (``"<set number>\\t"``:
a tab cannot occur in an id, :mod:`tapt.util.ids`); the run is split back by that prefix and
each set is scored with :func:`tapt.retrieval.metrics.score_run` on the split's qrels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tapt.data.arrow_corpus import corpus_texts as passage_texts
from tapt.data.beir import BeirDataset
from tapt.retrieval.evaluate import EvalReport, Retriever, check_split, score_retrieval
from tapt.retrieval.metrics import MetricResult, Run, score_run

SEPARATOR = "\t"
"""Between a set's number and a query id inside the one retrieval (never part of an id)."""


@dataclass
class QuerySetResults:
    """The split's own queries (a full report) and each alternative set's metrics and run."""

    original: EvalReport
    sets: dict[str, MetricResult]
    runs: dict[str, Run]


def tagged(number: int, query_id: str) -> str:
    return f"{number}{SEPARATOR}{query_id}"


def evaluate_query_sets(retriever: Retriever, dataset: BeirDataset, split: str,
                        query_sets: Mapping[str, Mapping[str, str]], *,
                        corpus_ids: Sequence[str] | None = None, with_title: bool = True,
                        info: dict | None = None) -> QuerySetResults | None:
    """Rank ``corpus_ids`` for the split's queries and for every set of ``query_sets``
    (``{name: {query id: text}}``, ids judged in ``split``) in one retrieval, and score each.

    None on a DDP rank other than 0 (as :func:`tapt.retrieval.evaluate.evaluate`)."""
    check_split(dataset, split)
    corpus_ids = list(dataset.corpus) if corpus_ids is None else list(corpus_ids)
    own = list(dataset.split(split))
    sets = {"": {query_id: dataset.queries[query_id] for query_id in own}, **query_sets}
    ids = [tagged(number, query_id) for number, queries in enumerate(sets.values())
           for query_id in queries]
    texts = [text for queries in sets.values() for text in queries.values()]
    retrieval = retriever.retrieve(corpus_ids, passage_texts(dataset.corpus, corpus_ids,
                                                             with_title), ids, texts)
    if retrieval.run is None:
        return None
    runs: dict[int, Run] = {number: {} for number in range(len(sets))}
    for key, docs in retrieval.run.items():
        number, _, query_id = key.partition(SEPARATOR)
        runs[int(number)][query_id] = docs
    retrieval.run = runs[0]
    sizes = {"query_sets": {name: len(queries) for name, queries in query_sets.items()}}
    original = score_retrieval(retrieval, retriever, dataset, split, corpus_ids=corpus_ids,
                               with_title=with_title, info={**(info or {}), **sizes})
    qrels = dataset.split(split)
    scored, named_runs = {}, {}
    for number, name in enumerate(query_sets, start=1):
        judged = {query_id: qrels[query_id] for query_id in query_sets[name]}
        scored[name] = score_run(judged, runs[number],
                                 relevant_from=dataset.rule.relevant_from)
        named_runs[name] = runs[number]
    return QuerySetResults(original=original, sets=scored, runs=named_runs)
