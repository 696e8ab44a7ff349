"""Training rows from a ``tapt pseudo`` file (``data.pseudo_queries``), read back checked.

The file (:mod:`tapt.retrieval.pseudo_labels`) is checked against its digest record first:
unchanged since ``tapt pseudo`` wrote it and made from this corpus (a file made from
another corpus, or edited since, is a :class:`~tapt.data.beir.DataError` naming it). Then
every line: a unique ``query_id``, a non-empty ``query``, a ``source`` passage, at least
one positive, known passage ids, whole ranks, finite scores, one ``teacher`` for the file,
no passage twice in a row. A bad line is an error naming the file, the line and the field.

Which passages a row may touch (``data.pseudo_passages``):

- ``unseen`` (default): a row whose source, positive or any negative is a passage training
  must never see (the relevant passages of ``data.decontaminate``'s splits and of a dev
  split carved from train: :attr:`~tapt.data.beir.BeirDataset.held_out`,
  :func:`tapt.data.splits.dev_passages`) is left out, so training reads none of their text,
  as for weak pairs; the teacher's ranking still ran over the whole corpus (an index-time
  statistic, such as BM25's IDF);
- ``all``: the held-out passages too, as a deployment adapts to the whole corpus it
  indexes, test passages included (the record says how many training read). Rows touching
  a carved dev split's relevant passages are still left out, as from negatives and weak
  pairs: dev, which picks the checkpoint, measures passages training never saw.

Each row is (``query``, ``positive``: the teacher's first rank, ``negative``,
``negative_2``, ...: at most ``data.pseudo_negatives`` of the file's negatives), streamed
into Arrow files in the run's scratch folder (as weak pairs are), with a ``label`` column
for the distillation losses: the teacher's scores divided by the query's largest
(``distill_kl``: one per passage), or the positive's minus each negative's (``margin_mse``,
``clear``). A row without a negative is kept for the contrastive losses (a pair) and left
out for those (counted).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tapt.data.beir import BeirDataset, DataError
from tapt.data.content import corpus_digest, unchanged_record
from tapt.data.lines import check_id, iter_jsonl
from tapt.data.splits import dev_passages
from tapt.util.finite import finite_number

KIND = "pseudo queries"
MADE_BY = "tapt pseudo"
Passages = Literal["unseen", "all"]
LabelKind = Literal["none", "scores", "margins"]


@dataclass(frozen=True)
class PseudoRow:
    """One checked line: the query, its passages and the teacher's scores of them."""

    query_id: str
    query: str
    source: str
    positive: str
    negatives: tuple[str, ...]
    scores: tuple[float, ...]
    """The positive's score, then each negative's."""

    @property
    def passages(self) -> tuple[str, ...]:
        return (self.source, self.positive, *self.negatives)


@dataclass
class PseudoFile:
    """A checked file: its rows, its teacher and its digest record (None: none beside it)."""

    path: Path
    teacher: str
    rows: list[PseudoRow]
    record: dict | None


def check_record(path: Path, dataset: BeirDataset) -> dict | None:
    """The file's digest record, checked: unchanged (:func:`tapt.data.content.unchanged_record`),
    a ``tapt pseudo`` output, made from ``dataset``'s corpus. None when it has none (a
    warning says the file is not checked)."""
    record = unchanged_record(path, made_by=MADE_BY)
    if record is None:
        return None
    if record.get("kind") != KIND:
        raise DataError(path, f"not a {MADE_BY} output (its digest record says "
                              f"{record.get('kind')!r})")
    if record.get("corpus") != corpus_digest(dataset):
        raise DataError(path, f"made from another corpus ({record.get('source') or '?'}) than "
                              f"{dataset.source or 'this dataset'}'s; make it again with "
                              f"{MADE_BY} --data {dataset.source}")
    return record


def _string(path: Path, line: int, record: dict, name: str) -> str:
    value = record.get(name)
    if not isinstance(value, str) or not value.strip():
        raise DataError(path, "expected a non-empty string", line, name)
    return value


def _entries(path: Path, line: int, record: dict, name: str, corpus) -> list[tuple[str, float]]:
    value = record.get(name)
    if not isinstance(value, list):
        raise DataError(path, "expected a list of {id, rank, score}", line, name)
    entries = []
    for position, entry in enumerate(value):
        where = f"{name}[{position}]"
        if not isinstance(entry, dict):
            raise DataError(path, "expected an object {id, rank, score}", line, where)
        doc_id = entry.get("id")
        if not isinstance(doc_id, str) or not doc_id:
            raise DataError(path, "expected a passage id", line, f"{where}.id")
        check_id(path, line, doc_id, f"{where}.id")
        if doc_id not in corpus:
            raise DataError(path, f"unknown passage {doc_id!r}", line, f"{where}.id")
        rank = entry.get("rank")
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise DataError(path, f"expected a rank >= 1, got {rank!r}", line, f"{where}.rank")
        score = entry.get("score")
        if not finite_number(score):
            raise DataError(path, f"expected a finite number, got {score!r}", line,
                            f"{where}.score")
        entries.append((doc_id, float(score)))
    return entries


def read_pseudo_file(path: str | Path, dataset: BeirDataset) -> PseudoFile:
    """Read and check a ``tapt pseudo`` file against ``dataset`` (module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, f"pseudo-queries file not found (make it with {MADE_BY})")
    record = check_record(path, dataset)
    corpus = dataset.corpus
    rows: list[PseudoRow] = []
    seen: set[str] = set()
    teacher = None
    for line, item in iter_jsonl(path):
        query_id = _string(path, line, item, "query_id")
        check_id(path, line, query_id, "query_id")
        if query_id in seen:
            raise DataError(path, f"query {query_id!r} appears twice", line, "query_id")
        seen.add(query_id)
        query = _string(path, line, item, "query")
        source = _string(path, line, item, "source")
        if source not in corpus:
            raise DataError(path, f"unknown passage {source!r}", line, "source")
        name = _string(path, line, item, "teacher")
        if teacher is not None and name != teacher:
            raise DataError(path, f"teacher {name!r} differs from the file's first line "
                                  f"({teacher!r}): one file holds one teacher", line, "teacher")
        teacher = name
        positives = _entries(path, line, item, "positives", corpus)
        if not positives:
            raise DataError(path, "expected at least one positive", line, "positives")
        negatives = _entries(path, line, item, "negatives", corpus)
        ids = [doc_id for doc_id, _ in positives + negatives]
        if len(set(ids)) != len(ids):
            raise DataError(path, "a passage is listed twice in the row", line, "negatives")
        rows.append(PseudoRow(query_id=query_id, query=query, source=source,
                              positive=positives[0][0],
                              negatives=tuple(doc_id for doc_id, _ in negatives),
                              scores=(positives[0][1], *(score for _, score in negatives))))
    if teacher is None:
        raise DataError(path, f"no rows ({MADE_BY} writes one line per pseudo-query)")
    return PseudoFile(path=path, teacher=teacher, rows=rows, record=record)


def check_pseudo_settings(data) -> None:
    """A recipe's ``data.pseudo_*`` keys (``data``: its data section): each needs
    ``data.pseudo_queries``; the rows have no batch group; ``only`` excludes weak pairs.
    Raises ``ValueError`` naming the key."""
    keys = ("pseudo_mix", "pseudo_passages", "pseudo_negatives", "pseudo_max", "pseudo_seed")
    used = [key for key in keys if getattr(data, key) != type(data).model_fields[key].default]
    if used and data.pseudo_queries is None:
        raise ValueError(f"data.{used[0]} needs data.pseudo_queries (a tapt pseudo output)")
    if data.pseudo_queries is not None and data.batch_by != "none":
        raise ValueError(f"data.pseudo_queries cannot be mixed with data.batch_by: "
                         f"{data.batch_by} (pseudo-query rows have no group)")
    if data.pseudo_mix == "only" and data.weak_pairs != "none":
        raise ValueError("data.pseudo_mix: only trains on the pseudo-query rows alone; drop "
                         "data.weak_pairs or mix proportionally")


def row_label(row: PseudoRow, kind: LabelKind, negatives: int) -> list[float] | None:
    """The row's distillation target (module docstring); None for ``none``."""
    if kind == "none":
        return None
    scores = row.scores[:negatives + 1]
    scale = max(abs(score) for score in scores) or 1.0
    scores = [score / scale for score in scores]
    if kind == "scores":
        return scores
    return [scores[0] - score for score in scores[1:]]


def columns(negatives: int) -> list[str]:
    """``query``, ``positive``, ``negative``, ``negative_2``, ... (``negatives`` of them)."""
    return ["query", "positive", *(["negative"] if negatives else []),
            *(f"negative_{i}" for i in range(2, negatives + 1))]


def pseudo_rows_dataset(file: PseudoFile, dataset: BeirDataset, *, folder: Path,
                        passages: Passages = "unseen", negatives: int = 1,
                        maximum: int | None = None, seed: int = 0,
                        label: LabelKind = "none", with_title: bool = True):
    """``(rows, record)``: the file's rows as a ``datasets.Dataset`` streamed into Arrow
    files under ``folder`` (module docstring), every row with exactly ``negatives``
    negatives (rows with fewer are left out and counted; 0: pairs), at most ``maximum`` of
    them (a seeded sample), and the record of what was used (results.json, the card)."""
    from datasets import Dataset, Features, Sequence, Value

    held_out = dataset.held_out
    dev = dev_passages(dataset, (dataset.carved or {}).get("carved_from", ""))
    unseen = held_out | dev
    counts = {"in_file": len(file.rows), "touching_held_out": 0, "short_negatives": 0}
    kept: list[PseudoRow] = []
    never_read = unseen if passages == "unseen" else dev
    for row in file.rows:
        if never_read.intersection(row.passages):
            counts["touching_held_out"] += 1
            continue
        if len(row.negatives) < negatives:
            counts["short_negatives"] += 1
            continue
        kept.append(row)
    if maximum is not None and maximum < len(kept):
        kept = sorted(random.Random(seed).sample(kept, maximum), key=lambda r: r.query_id)
    if not kept:
        raise DataError(file.path, f"no pseudo-query row is left to train on: "
                                   f"{counts['touching_held_out']:,} touch passages training "
                                   f"must not see (data.pseudo_passages: {passages}) and "
                                   f"{counts['short_negatives']:,} have fewer than "
                                   f"{negatives} negatives (data.pseudo_negatives)")
    names = columns(negatives)
    features = {name: Value("string") for name in names}
    if label != "none":
        features["label"] = Sequence(Value("float32"))  # as the labelled rows' lists

    def text(doc_id: str) -> str:
        return dataset.corpus[doc_id].as_text(with_title)

    def generate() -> Iterator[dict]:
        for row in kept:
            item = {"query": row.query, "positive": text(row.positive)}
            for name, doc_id in zip(names[2:], row.negatives):
                item[name] = text(doc_id)
            target = row_label(row, label, negatives)
            if target is not None:
                item["label"] = target
            yield item

    rows = Dataset.from_generator(generate, features=Features(features),
                                  cache_dir=str(folder), fingerprint=uuid.uuid4().hex)
    used = {doc_id for row in kept for doc_id in row.passages}
    record = {"file": str(file.path), "teacher": file.teacher, "passages": passages,
              "rows": len(kept), "negatives": negatives, "max": maximum, "seed": seed,
              "rows_in_file": counts["in_file"],
              "left_out_touching_unseen": counts["touching_held_out"],
              "left_out_short_negatives": counts["short_negatives"],
              "passages_read": len(used),
              "held_out_passages_read": len(used & held_out),
              "dev_passages_read": len(used & dev)}
    return rows, record
