"""Teacher scores for distillation: one score per (query, passage) of the training rows.

``tapt score`` scores, for every query of a split, the passages its training rows can hold:
its anchors, its graded negatives (hard, soft) and, with a ``tapt mine`` file, its mined
negatives. The teacher is BM25 (bm25s over the whole corpus, so its IDF is the one
``tapt bm25`` ranks with) or any encoder through tapt's dense retrieval (cosine or dot
product, as the encoder's index scores; only the needed passages are encoded). Each pair is
scored exactly through the retrievers' ``also_score``, whatever its rank.

The file is JSONL, one line per pair: ``{"query_id", "passage_id", "score", "teacher",
"data", "split", "mined"}`` (the last three are provenance), written atomically, with a
digest record beside it (``NAME.digest.json``: the file's SHA-256, the content digests of
the data and split it was scored on, and of the mined file: :mod:`tapt.data.content`).
:func:`read_teacher_scores` checks the record first (a file changed since, scored on other
data, another split or other mined negatives than the training's is a
:class:`~tapt.data.beir.DataError` naming the file), then validates every line against the
dataset; a bad line is an error naming the file, the line and the field.

``tapt score --teacher MODEL --fuse-bm25 ALPHA`` fuses a model teacher with BM25
(:func:`fused_scores`): on data where neither is best alone (SciFact: the base model
fused with BM25 beats either, and beats a model fine-tuned on it), the fusion is the
teacher to distil.

Example::

    from tapt.data.content import made_from
    from tapt.retrieval.bm25 import BM25Retriever

    pairs = needed_pairs(dataset, "train")
    scores = score_pairs(BM25Retriever(), dataset, pairs, corpus_ids=list(dataset.corpus))
    write_teacher_scores("scores.jsonl", scores, teacher="bm25", data=dataset.source,
                         split="train", made_from=made_from(dataset, "train"))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tapt.data.arrow_corpus import corpus_texts as passage_texts
from tapt.data.beir import BeirDataset, DataError
from tapt.data.content import check_made_from
from tapt.data.lines import check_id, iter_jsonl
from tapt.data.splits import carved_off
from tapt.retrieval.hybrid import linear_fusion
from tapt.util.bounds import TRAINING_TARGET
from tapt.util.digests import file_digest, remove_sidecar, write_sidecar
from tapt.util.files import atomic_write_json
from tapt.util.finite import finite_number

Scores = dict[str, dict[str, float]]
"""``{query_id: {passage_id: score}}``."""


@dataclass(frozen=True)
class TeacherScores:
    """A validated score file: the teacher's name and its scores."""

    path: Path
    teacher: str
    scores: Scores

    def score(self, query_id: str, passage_id: str) -> float:
        """The teacher's score of a pair; a :class:`DataError` naming the file when absent."""
        try:
            return self.scores[query_id][passage_id]
        except KeyError:
            raise DataError(self.path, f"no teacher score for query {query_id!r} and passage "
                                       f"{passage_id!r} (score the same data, split and "
                                       "mined file with tapt score)") from None


def needed_pairs(dataset: BeirDataset, split: str,
                 mined: Mapping[str, Sequence[str]] | None = None) -> dict[str, list[str]]:
    """Per query of ``split``: its anchors, hard and soft negatives (the dataset's relevance
    rule) and its ``mined`` negatives, each passage once, in that order."""
    rule = dataset.rule
    pairs: dict[str, list[str]] = {}
    for query_id, judged in dataset.split(split).items():
        ids = [*rule.relevant_ids(judged), *rule.graded_ids(judged, rule.hard_negative),
               *rule.graded_ids(judged, rule.soft_negative), *(mined or {}).get(query_id, ())]
        pairs[query_id] = list(dict.fromkeys(ids))
    return pairs


def score_pairs(retriever, dataset: BeirDataset, pairs: Mapping[str, Sequence[str]], *,
                corpus_ids: Sequence[str] | None = None, with_title: bool = True) -> Scores:
    """Score every pair with ``retriever`` (a BM25 or dense retriever) over ``corpus_ids``
    (default: the passages of ``pairs``; give the whole corpus to BM25, whose scores
    depend on it). Returns exactly the pairs asked for."""
    if corpus_ids is None:
        corpus_ids = list(dict.fromkeys(doc_id for ids in pairs.values() for doc_id in ids))
    query_ids = [query_id for query_id, ids in pairs.items() if ids]
    retriever.top_k = 1  # the ranking is not used; also_score scores every pair
    retrieval = retriever.retrieve(
        corpus_ids, passage_texts(dataset.corpus, corpus_ids, with_title),
        query_ids, [dataset.queries[query_id] for query_id in query_ids],
        also_score={query_id: pairs[query_id] for query_id in query_ids})
    if retrieval.run is None:  # a rank other than 0 under a process group: rank 0 scores
        return {}
    run = retrieval.run or {}
    scores: Scores = {}
    for query_id in query_ids:
        got = run.get(query_id, {})
        missing = [doc_id for doc_id in pairs[query_id] if doc_id not in got]
        if missing:
            raise ValueError(f"{retriever.name} gave no score for query {query_id!r} and "
                             f"passage {missing[0]!r} (is it in the corpus?)")
        scores[query_id] = {doc_id: got[doc_id] for doc_id in pairs[query_id]}
    return scores


def fused_scores(dense: Scores, sparse: Scores, alpha: float) -> Scores:
    """A fused teacher: per query, ``alpha x minmax(dense) + (1 - alpha) x minmax(sparse)``
    over the query's scored passages (the linear fusion of ``tapt eval --hybrid bm25
    --fusion linear``, :func:`tapt.retrieval.hybrid.linear_fusion`), so each of the two
    teachers ranks the row's passages on one [0, 1] scale. Both must hold the same pairs."""
    for query_id in dict.fromkeys([*dense, *sparse]):
        if set(dense.get(query_id, {})) != set(sparse.get(query_id, {})):
            raise ValueError(f"fused teacher: the two teachers scored different passages for "
                             f"query {query_id!r}")
    fused = linear_fusion(dense, sparse, alpha)
    return {query_id: {doc_id: fused[query_id][doc_id] for doc_id in row}
            for query_id, row in dense.items()}


def write_teacher_scores(path: str | Path, scores: Scores, *, teacher: str, data: str,
                         split: str, mined: str | None = None,
                         made_from: dict | None = None) -> Path:
    """One JSON line per pair with its provenance, written to a temporary name and renamed
    (a crash never leaves half a file), then its digest record: the file's digest,
    ``made_from`` (:func:`tapt.data.content.made_from` of the data scored) and the mined
    file's digest."""
    records = [{"query_id": query_id, "passage_id": doc_id, "score": round(score, 6),
                "teacher": teacher, "data": data, "split": split, "mined": mined}
               for query_id, row in scores.items() for doc_id, score in row.items()]
    mined_record = None if mined is None else {"path": str(mined),
                                               "sha256": file_digest(mined)}
    remove_sidecar(path)  # an older record never describes the new file
    written = atomic_write_json(path, records, lines=True)
    try:
        write_sidecar(written, kind="teacher scores", teacher=teacher, mined=mined_record,
                      **(made_from or {"split": split}))
    except OSError:
        written.unlink(missing_ok=True)  # no file without its record
        raise
    return written


def read_teacher_scores(path: str | Path, dataset: BeirDataset, split: str, *,
                        mined: str | Path | None = None) -> TeacherScores:
    """Read and validate a score file for the queries of ``split``: its digest record
    (unchanged since written, scored on this data and split, and on the mined file
    ``mined`` the training uses, if any), then known ids, a finite ``score`` in
    :data:`tapt.util.bounds.TRAINING_TARGET` (scores become float32 targets), one
    ``teacher`` for the whole file, no pair twice."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "teacher-scores file not found (make it with tapt score)")
    record = check_made_from(path, dataset, split, made_by="tapt score")
    if record is not None:
        check_mined(path, record.get("mined"), mined)
    qrels = dataset.split(split)
    skipped = carved_off(dataset, split)  # scored before the dev carve: their lines stay
    scores: Scores = {}
    teacher = None
    for line, record in iter_jsonl(path):
        query_id = _string(path, line, record, "query_id")
        if query_id not in dataset.queries:
            raise DataError(path, f"unknown query {query_id!r}", line, "query_id")
        if query_id not in qrels and query_id in skipped:
            continue
        if query_id not in qrels:
            raise DataError(path, f"query {query_id!r} is not in the {split} split", line,
                            "query_id")
        passage_id = _string(path, line, record, "passage_id")
        if passage_id not in dataset.corpus:
            raise DataError(path, f"unknown passage {passage_id!r}", line, "passage_id")
        score = record.get("score")
        if not finite_number(score):
            raise DataError(path, f"expected a finite number, got {score!r}", line, "score")
        if not TRAINING_TARGET.contains(float(score)):  # finite, yet no float32 target
            raise DataError(path, f"{score!r} is out of range: a teacher score must be "
                                  f"{TRAINING_TARGET.documented}", line, "score")
        name = record.get("teacher")
        if not isinstance(name, str) or not name:
            raise DataError(path, "expected a non-empty string", line, "teacher")
        if teacher is not None and name != teacher:
            raise DataError(path, f"teacher {name!r} differs from the file's first line "
                                  f"({teacher!r}): one file holds one teacher", line, "teacher")
        teacher = name
        row = scores.setdefault(query_id, {})
        if passage_id in row:
            raise DataError(path, f"pair ({query_id!r}, {passage_id!r}) appears twice", line,
                            "passage_id")
        row[passage_id] = float(score)
    if teacher is None:
        raise DataError(path, "no teacher scores (tapt score writes one line per pair)")
    return TeacherScores(path=path, teacher=teacher, scores=scores)


def check_mined(path: Path, scored: object, mined: str | Path | None) -> None:
    """The mined negatives a file was scored with (``scored``: its record's ``mined``) must
    be the training's ``mined`` file, content and all: its negatives need their scores."""
    if mined is None:
        return  # scores of mined negatives the training does not use are unused
    hint = f"score again with tapt score --mined {mined}"
    if not isinstance(scored, dict):
        raise DataError(path, f"scored without mined negatives, but the training uses "
                              f"data.mined_negatives {mined}; {hint}")
    if scored.get("sha256") != file_digest(mined):
        raise DataError(path, f"scored with the mined negatives of {scored.get('path')}, "
                              f"whose content differs from data.mined_negatives {mined}; "
                              f"{hint}")


def _string(path: Path, line: int, record: dict, name: str) -> str:
    value = record.get(name)
    if not isinstance(value, str) or not value:
        raise DataError(path, "expected a non-empty string", line, name)
    check_id(path, line, value, name)
    return value
