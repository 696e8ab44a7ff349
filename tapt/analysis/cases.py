"""Case studies (FormBench Appendix D): the queries on which systems disagree most, with the
rank of the first relevant passage per system and each system's top passages.

The systems are result files of ``tapt eval`` / ``tapt bm25 --output ... --save-run K``:
``--save-run`` stores each query's top K passages (ids and scores, in trec_eval's order)
in the file's ``ranking`` section, so a case shows the very ranking the metrics were
computed on, with no model loaded again. (Re-reading a TREC ``--run`` file would need a
second file per system and its pairing with the result file; the one self-contained file
is simpler and cannot be mismatched.) The texts and the grades come from the data
(``--data``), which must hold every stored passage.

The result files must have been evaluated on the same data and settings, and on the data
given (:mod:`tapt.analysis.pairing`: the corpus, queries and qrels digests, split, relevance
rule, sub-corpus and top-k), else the cases are refused naming the field; the relevance
rule defaults to the one the results recorded.

Disagreement on a query is the spread of the reciprocal rank of its first relevant
passage across the systems (``max - min`` of ``1 / rank``; a relevant passage beyond a
system's stored depth counts 0): 1.0 when one system ranks it first and another misses
it. Queries are listed by decreasing disagreement, ties by query id.

Example::

    systems = [read_system("base=base.json"), read_system("tapt=tapt.json")]
    cases = find_cases(systems, dataset, limit=10)
    print(render_markdown(cases, systems, dataset))
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tapt.analysis.pairing import FIELDS, DataKey, check_pair, data_key, unfingerprinted_note
from tapt.analysis.result_files import read_result, split_spec
from tapt.data.beir import BeirDataset
from tapt.data.fingerprint import remember_digests
from tapt.retrieval.metrics import METRIC_KEYS, trec_ranking

logger = logging.getLogger(__name__)

RANKING = "ranking"
"""The result file's section written by ``--save-run``."""


@dataclass
class SystemRun:
    """One result file: its name, the stored ranking and the per-query metric values."""

    name: str
    source: str
    split: str
    depth: int
    ranking: dict[str, list[tuple[str, float]]]
    per_query: dict[str, dict[str, float]]
    key: DataKey | None = None
    """The data and settings it was evaluated on (:func:`tapt.analysis.pairing.data_key`)."""
    stored_depth: int | None = None
    """The depth its file stored when :func:`at_common_depth` cut it shorter, else None."""


def at_common_depth(systems: Sequence[SystemRun]) -> list[SystemRun]:
    """The systems' rankings cut to the shallowest stored depth (``--save-run K`` of each
    file), so that "not found" means the same for all: a passage at rank 50 of a file that
    stored 100 and absent from one that stored 10 would otherwise count as a disagreement.
    A cut is logged and shown in the cases' header."""
    depth = min(system.depth for system in systems)
    if all(system.depth == depth for system in systems):
        return list(systems)
    logger.warning("the result files stored rankings of different depths (%s): the cases "
                   "compare the top %d of each", ", ".join(f"{s.name} {s.depth}" for s in systems),
                   depth)
    return [system if system.depth == depth else replace(
        system, depth=depth, stored_depth=system.depth,
        ranking={query: rows[:depth] for query, rows in system.ranking.items()})
        for system in systems]


def _ranking_problem(source: str, where: str, problem: str) -> ValueError:
    return ValueError(f"{source}: field '{RANKING}.{where}': {problem}")


def check_ranking(section: object, source: str) -> tuple[int, dict[str, list[tuple[str, float]]]]:
    """``(depth, {query id: [(passage id, score), ...]})`` of a ``ranking`` section, checked:
    a positive ``depth``, at most that many ``[id, score]`` pairs per query, finite scores,
    no passage twice, in trec_eval's order (descending score, ties by descending id)."""
    if section is None:
        raise ValueError(f"{source}: no '{RANKING}' section; tapt cases reads the stored "
                         "ranking: write the result with tapt eval/bm25 --output ... "
                         "--save-run K")
    if not isinstance(section, dict):
        raise ValueError(f"{source}: field '{RANKING}': expected an object")  # noqa: TRY004
    depth = section.get("depth")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise _ranking_problem(source, "depth", f"expected a positive integer, got {depth!r}")
    queries = section.get("queries")
    if not isinstance(queries, dict) or not queries:
        raise _ranking_problem(source, "queries", "expected a non-empty object of query id "
                                                  "-> ranked [passage id, score] pairs")
    ranking: dict[str, list[tuple[str, float]]] = {}
    for query_id, rows in queries.items():
        where = f"queries.{query_id}"
        if not isinstance(rows, list) or len(rows) > depth:
            raise _ranking_problem(source, where, f"expected a list of at most {depth} "
                                                  "[passage id, score] pairs")
        pairs = []
        for row in rows:
            if (not isinstance(row, list) or len(row) != 2 or not isinstance(row[0], str)
                    or isinstance(row[1], bool) or not isinstance(row[1], (int, float))
                    or not math.isfinite(row[1])):
                raise _ranking_problem(source, where, f"expected [passage id, finite score] "
                                                      f"pairs, got {str(row)[:80]}")
            pairs.append((row[0], float(row[1])))
        if len({doc_id for doc_id, _ in pairs}) != len(pairs):
            raise _ranking_problem(source, where, "a passage is listed twice")
        if trec_ranking(dict(pairs)) != pairs:
            raise _ranking_problem(source, where, "not in ranked order (descending score, "
                                                  "ties by descending id)")
        ranking[str(query_id)] = pairs
    return depth, ranking


def read_system(spec: str) -> SystemRun:
    """A ``[NAME=]RESULT.json`` of ``tapt eval/bm25 --save-run``, checked (the name defaults
    to the evaluated model's folder or id)."""
    name, path = split_spec(spec)
    data = read_result(path)
    depth, ranking = check_ranking(data.get(RANKING), path)
    per_query = data.get("per_query")
    if not isinstance(per_query, dict) or not all(isinstance(row, dict)
                                                  for row in per_query.values()):
        raise ValueError(f"{path}: field 'per_query': expected an object of query id -> "
                         "metrics")
    evaluated = data["evaluated"]
    split = evaluated.get("split")
    if not isinstance(split, str):
        raise ValueError(f"{path}: field 'evaluated.split': expected the split's name")  # noqa: TRY004
    label = name or Path(str(evaluated.get("model", path))).name or str(path)
    return SystemRun(name=label, source=str(path), split=split, depth=depth, ranking=ranking,
                     per_query=per_query, key=data_key(data, str(path)))


@dataclass
class Case:
    """One query: each system's rank of the first relevant passage (None: not in its
    stored top ``depth``) and the disagreement."""

    query_id: str
    ranks: dict[str, int | None]
    disagreement: float


def first_relevant_rank(ranking: Sequence[tuple[str, float]], relevant: set[str]) -> int | None:
    """The 1-based rank of the first passage of ``relevant`` in ``ranking``, or None."""
    return next((position for position, (doc_id, _) in enumerate(ranking, start=1)
                 if doc_id in relevant), None)


def relevant_passages(dataset: BeirDataset, split: str, query_id: str) -> set[str]:
    """The passages the dataset's relevance rule calls relevant for ``query_id``."""
    return {doc_id for doc_id, grade in dataset.split(split)[query_id].items()
            if dataset.rule.is_relevant(grade)}


def common_split(systems: Sequence[SystemRun]) -> str:
    """The split all systems were evaluated on (they must agree, as in every other data
    field of :mod:`tapt.analysis.pairing`) and whose names differ."""
    if not systems:
        raise ValueError("tapt cases needs at least one result file")
    splits = {system.split for system in systems}
    if len(splits) > 1:
        raise ValueError("the result files were evaluated on different splits: "
                         + ", ".join(f"{s.source} ({s.split})" for s in systems))
    names = [system.name for system in systems]
    if len(set(names)) != len(names):
        raise ValueError(f"the systems' names must differ (label them NAME=RESULT.json): "
                         f"{', '.join(names)}")
    keyed = [system.key for system in systems if system.key is not None]
    for other in keyed[1:]:
        check_pair(keyed[0], other, fields=FIELDS, allowed=(), where="tapt cases",
                   liftable=False)
    return splits.pop()


def recorded_relevance(systems: Sequence[SystemRun]) -> int | str:
    """The lowest relevant grade the result files recorded (``auto`` when none records a
    rule: files not written by tapt eval / tapt bm25); :func:`common_split` checked that they
    agree."""
    for system in systems:
        rule = (system.key.values.get("relevance") if system.key is not None else None)
        if isinstance(rule, dict) and isinstance(rule.get("relevant_from"), int):
            return rule["relevant_from"]
    return "auto"


def check_data(systems: Sequence[SystemRun], dataset: BeirDataset, split: str) -> None:
    """The data given must be what the results were evaluated on: its corpus, queries and
    the split's qrels digests and its relevance rule against each result's record (fields
    a result does not record pass; files without a fingerprint are warned about)."""
    digests = remember_digests(dataset, [split])
    given = DataKey(source=f"--data {dataset.source or '(in memory)'}", fingerprinted=True,
                    values={"corpus": digests.get("corpus"), "queries": digests.get("queries"),
                            "qrels": digests.get(f"qrels/{split}"), "split": split,
                            "relevance": dataset.rule.to_dict()})
    keys = [system.key for system in systems if system.key is not None]
    for key in keys:
        check_pair(given, key, fields=("corpus", "queries", "qrels", "split", "relevance"),
                   allowed=(), where="tapt cases", liftable=False)
    note = unfingerprinted_note(keys)
    if note:
        logger.warning("%s", note)


def check_systems(systems: Sequence[SystemRun], dataset: BeirDataset) -> str:
    """:func:`common_split`, :func:`check_data`, and every stored passage must be in
    ``dataset``'s corpus."""
    split = common_split(systems)
    check_data(systems, dataset, split)
    for system in systems:
        for query_id, pairs in system.ranking.items():
            for doc_id, _ in pairs:
                if doc_id not in dataset.corpus:
                    raise _ranking_problem(system.source, f"queries.{query_id}",
                                           f"passage '{doc_id}' is not in the corpus of "
                                           f"{dataset.source} (a result of other data?)")
    return split


def find_cases(systems: Sequence[SystemRun], dataset: BeirDataset, *, limit: int = 10,
               query: str | None = None) -> list[Case]:
    """The ``limit`` queries with the largest disagreement (or ``query`` alone), among the
    queries every system ranked that have a relevant passage."""
    split = check_systems(systems, dataset)
    qrels = dataset.split(split)
    shared = set.intersection(*(set(system.ranking) for system in systems))
    if any(len(system.ranking) != len(shared) for system in systems):
        logger.warning("the result files rank %s queries; %d are in all of them",
                       "/".join(str(len(s.ranking)) for s in systems), len(shared))
    candidates = sorted(q for q in shared if q in qrels and relevant_passages(dataset, split, q))
    if query is not None:
        if query not in candidates:
            raise ValueError(f"--query {query}: not a query of the {split} split with a "
                             "relevant passage that every result file ranks")
        candidates = [query]
    cases = []
    for query_id in candidates:
        relevant = relevant_passages(dataset, split, query_id)
        ranks = {s.name: first_relevant_rank(s.ranking[query_id], relevant) for s in systems}
        reciprocal = [0.0 if rank is None else 1.0 / rank for rank in ranks.values()]
        cases.append(Case(query_id, ranks, max(reciprocal) - min(reciprocal)))
    cases.sort(key=lambda case: (-case.disagreement, case.query_id))
    return cases[:limit]


def cut(text: str, chars: int) -> str:
    """``text`` on one line, at most ``chars`` characters (cut at a word, then ``…``), with
    Markdown table pipes escaped."""
    flat = " ".join(text.split())
    if len(flat) > chars:
        flat = flat[:chars].rsplit(" ", 1)[0].rstrip(" ,;:.") + " …"
    return flat.replace("|", "\\|").replace("`", "\\`")


def code(text: str) -> str:
    """``text`` as a Markdown code span, whatever backticks or pipes it holds (a fence one
    backtick longer than its longest run of them; pipes escaped for tables)."""
    fence = "`" * (max(map(len, re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"


def rank_text(rank: int | None, depth: int) -> str:
    return f"> {depth} (not in its stored top {depth})" if rank is None else str(rank)


def render_markdown(cases: Sequence[Case], systems: Sequence[SystemRun],
                    dataset: BeirDataset, *, passages: int = 3, chars: int = 300,
                    metric: str = "binary_ndcg@10") -> str:
    """The cases as Markdown: per query its text, the relevant passages, a table of each
    system's first-relevant rank and ``metric``, and each system's top ``passages``
    passages (rank, id, grade, score, text cut to ``chars`` characters)."""
    if metric not in METRIC_KEYS:
        raise ValueError(f"metric must be one of {METRIC_KEYS}, got {metric!r}")
    split = systems[0].split
    lines = [f"# Case studies: {', '.join(s.name for s in systems)}", "",
             (f"{dataset.source} ({split} split); relevant: {dataset.rule.describe()}. "
             "Queries where the systems disagree most (spread of 1 / rank of the first "
             "relevant passage)."), ""]
    if cut_systems := [s for s in systems if s.stored_depth is not None]:
        lines += [(f"Ranks are compared within the top {systems[0].depth} of every system: "
                   + ", ".join(f"{s.name}'s file stored {s.stored_depth}" for s in cut_systems)
                   + "."), ""]
    for case in cases:
        judged = dataset.split(split)[case.query_id]
        relevant = sorted(relevant_passages(dataset, split, case.query_id))
        lines += [f"## Query {code(case.query_id)} (disagreement {case.disagreement:.3f})", "",
                  f"> {cut(dataset.queries[case.query_id], 10 * chars)}", "",
                  "Relevant: " + ", ".join(f"{code(d)} (grade {judged[d]})" for d in relevant),
                  "", f"| system | rank of the first relevant passage | {metric} |",
                  "|---|---:|---:|"]
        for system in systems:
            value = system.per_query.get(case.query_id, {}).get(metric)
            shown = f"{value:.4f}" if isinstance(value, (int, float)) else "-"
            lines.append(f"| {system.name} | {rank_text(case.ranks[system.name], system.depth)}"
                         f" | {shown} |")
        first = relevant[0]
        lines += ["", (f"Relevant passage {code(first)}: "
                      f"{cut(dataset.corpus[first].as_text(), chars)}"), ""]
        for system in systems:
            lines += [f"### {system.name}: top {passages}", "",
                      "| rank | passage | grade | score | text |", "|---:|---|---:|---:|---|"]
            for position, (doc_id, score) in enumerate(
                    system.ranking[case.query_id][:passages], start=1):
                grade = judged.get(doc_id)
                lines.append(f"| {position} | {code(doc_id)} | {'-' if grade is None else grade} "
                             f"| {score:.4f} | {cut(dataset.corpus[doc_id].as_text(), chars)} |")
            lines.append("")
    if not cases:
        lines += ["No query with a relevant passage is ranked by every system.", ""]
    return "\n".join(lines)
