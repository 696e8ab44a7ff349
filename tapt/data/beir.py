"""Load, validate and write BEIR-format retrieval datasets (FormBench's format).

A BEIR folder holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl``
(``_id``, ``text``) and ``qrels/{split}.tsv`` (header ``query-id  corpus-id  score``).
FormBench grades its qrels: 3 = anchor, 2 = hard negative, 1 = soft negative; most public
BEIR sets mark relevant passages with 1. Which grade is relevant is the dataset's
:class:`~tapt.data.relevance.RelevanceRule` (``auto``: FormBench's when a grade of 3 or
more occurs, else BEIR's). Ids follow :mod:`tapt.util.ids` (no whitespace or control
characters). Loading a split also reads the query ids of the other qrels files present:
a query judged in two splits is an error for training and a warning for evaluation.

BEIR's own loader (``beir.datasets.data_loader``) skips validation and keeps the whole
package's dependencies; this module is small, checks every line before use and reports
``file:line: field: problem`` so that bad input fails before any training starts.
"""

from __future__ import annotations

import csv
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tapt.data.lines import (  # noqa: F401 (importable from here, as before)
    MAX_LINE_BYTES,
    UTF8_BOM,
    DataError,
    check_id,
    decoded_lines,
    iter_jsonl,
    string_field,
)
from tapt.data.relevance import (  # noqa: F401  (the grades, importable from here too)
    ANCHOR,
    HARD_NEGATIVE,
    MAX_GRADE,
    SOFT_NEGATIVE,
    RelevanceRule,
    choose_rule,
)
from tapt.data.split_leaks import (
    LeakPolicy,
    check_disjoint_splits,
    check_other_splits,
    read_judged_ids,
)
from tapt.util.ids import id_problem

logger = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
QRELS_HEADER = ("query-id", "corpus-id", "score")

Qrels = dict[str, dict[str, int]]
"""query id -> {corpus id -> graded relevance}."""


@dataclass
class Passage:
    """One corpus passage.

    Attributes:
        text: The passage text.
        title: Its title; empty when the corpus has none.

    Example::

        passage = Passage(text="The primer uses an acrylic binder.", title="US1234567")
        passage.as_text()  # "US1234567 The primer uses an acrylic binder."
    """

    text: str
    title: str = ""

    def as_text(self, with_title: bool = True) -> str:
        """``title + " " + text`` when there is a title (the BEIR convention), else text."""
        if with_title and self.title:
            return f"{self.title} {self.text}"
        return self.text


@dataclass
class BeirDataset:
    """A corpus, its queries and graded qrels per split, all validated (made by
    :func:`load_beir_folder` and :func:`tapt.data.sources.load_data`).

    Attributes:
        corpus: Passage id -> :class:`Passage` (or an equivalent memory-mapped
            :class:`~tapt.data.arrow_corpus.ArrowCorpus`).
        queries: Query id -> query text.
        qrels: Split name -> :data:`Qrels` (query id -> {passage id -> grade}).
        source: Where the data came from (a folder, or ``hf://datasets/...``).
        rule: Which grades are relevant (:class:`~tapt.data.relevance.RelevanceRule`).
        files: Split name -> its qrels file, for error messages.
        carved: How dev was carved from train (:mod:`tapt.data.splits`), else None.
        decontaminated: How train was decontaminated, else None.
        held_out: Passages training must never see.
        content_files: The corpus and queries files, whose ``digests`` are taken by
            :mod:`tapt.data.fingerprint`.
        digests: Those digests, once taken.

    Example::

        dataset = load_beir_folder("data/scifact", splits=["test"])
        dataset.rule.relevant_from       # 1: SciFact marks relevant passages 1
    """

    corpus: dict[str, Passage]
    queries: dict[str, str]
    qrels: dict[str, Qrels] = field(default_factory=dict)
    source: str = ""
    rule: RelevanceRule | None = None
    files: dict[str, str] = field(default_factory=dict)
    carved: dict | None = None
    """How a dev split was carved from train (:mod:`tapt.data.splits`), else None."""
    decontaminated: dict | None = None
    """How the train split was decontaminated (:func:`tapt.data.overlap.decontaminate`)."""
    held_out: frozenset[str] = frozenset()
    """Passages training must never see (relevant in a split decontaminated against)."""
    content_files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    digests: dict[str, str | None] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.rule is None:
            self.rule = choose_rule("auto", max_grade(self.qrels.values()))

    def split_file(self, name: str) -> str:
        """The qrels file of a split, for messages."""
        return self.files.get(name, f"{self.source or 'dataset'} (split '{name}')")

    def split(self, name: str) -> Qrels:
        """The qrels of one split; a clear error when it was not loaded."""
        if name not in self.qrels:
            raise KeyError(f"split '{name}' not loaded from {self.source}; "
                           f"available: {sorted(self.qrels)}")
        return self.qrels[name]

    def judged_ids(self, split: str) -> set[str]:
        """Every corpus id that carries a judgment in ``split``."""
        return {doc for docs in self.split(split).values() for doc in docs}


def max_grade(splits: Iterable[Qrels]) -> int | None:
    """The highest grade in some qrels (None when there is none)."""
    return max((grade for qrels in splits for docs in qrels.values() for grade in docs.values()),
               default=None)


def read_corpus(path: str | os.PathLike, *, allow_empty: bool = False) -> dict[str, Passage]:
    """Read and validate ``corpus.jsonl``; ``title`` is optional and may be empty."""
    path = Path(path)
    _require_file(path)
    return parse_corpus(iter_jsonl(path), path, allow_empty=allow_empty)


def parse_corpus(records: Iterable[tuple[int, dict]], source: str | os.PathLike, *,
                 allow_empty: bool = False) -> dict[str, Passage]:
    """Validate ``(line, record)`` pairs of a corpus; ``source`` names them in errors.

    ``allow_empty`` keeps passages whose text is empty (some public BEIR sets have them)."""
    return dict(checked_passages(records, source, allow_empty=allow_empty))


def checked_passages(records: Iterable[tuple[int, dict]], source: str | os.PathLike, *,
                     allow_empty: bool = False) -> Iterator[tuple[str, Passage]]:
    """``(id, passage)`` of each corpus record, validated as it streams by (the one rule
    set of the in-memory and the Arrow corpus): required ``_id`` and ``text``, optional
    ``title``, no duplicate id, at least one passage."""
    first_line: dict[str, int] = {}
    for line, record in records:
        doc_id = string_field(source, line, record, "_id")
        text = string_field(source, line, record, "text", allow_empty=allow_empty)
        title = string_field(source, line, record, "title", required=False, allow_empty=True)
        if doc_id in first_line:
            raise DataError(source, f"duplicate id '{doc_id}' (first on line "
                                    f"{first_line[doc_id]})", line, "_id")
        first_line[doc_id] = line
        yield doc_id, Passage(text=text, title=title)
    if not first_line:
        raise DataError(source, "no passages")


def read_queries(path: str | os.PathLike) -> dict[str, str]:
    """Read and validate ``queries.jsonl``."""
    path = Path(path)
    _require_file(path)
    return parse_queries(iter_jsonl(path), path)


def parse_queries(records: Iterable[tuple[int, dict]], source: str | os.PathLike
                  ) -> dict[str, str]:
    """Validate ``(line, record)`` pairs of queries; ``source`` names them in errors."""
    queries: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for line, record in records:
        query_id = string_field(source, line, record, "_id")
        text = string_field(source, line, record, "text")
        if query_id in queries:
            raise DataError(source, f"duplicate id '{query_id}' (first on line "
                                    f"{first_line[query_id]})", line, "_id")
        queries[query_id] = text
        first_line[query_id] = line
    if not queries:
        raise DataError(source, "no queries")
    return queries


def read_qrels(path: str | os.PathLike, corpus_ids: Iterable[str] | None = None,
               query_ids: Iterable[str] | None = None, *, require_anchor: bool = True,
               relevant_from: int | str = "auto") -> Qrels:
    """Read and validate one ``qrels/{split}.tsv``.

    Checks the header, integer scores, ids (:mod:`tapt.util.ids`), duplicate pairs, ids unknown
    to the corpus or the queries (when given), empty splits, and, with ``require_anchor``,
    that every query has a relevant passage under the rule ``relevant_from`` (``auto``:
    decided on this file's grades, see :func:`~tapt.data.relevance.choose_rule`).
    """
    qrels, first_line = parse_qrels(path, corpus_ids, query_ids)
    if require_anchor:
        rule = choose_rule(relevant_from, max_grade([qrels]))
        check_relevance(qrels, path, rule, first_line, require_anchor=True)
    return qrels


def parse_qrels(path: str | os.PathLike, corpus_ids: Iterable[str] | None = None,
                query_ids: Iterable[str] | None = None) -> tuple[Qrels, dict[str, int]]:
    """The judgments of one qrels file and the line of each query's first judgment; every
    check of :func:`read_qrels` but the relevance one."""
    path = Path(path)
    _require_file(path)
    corpus_ids = set(corpus_ids) if corpus_ids is not None else None
    query_ids = set(query_ids) if query_ids is not None else None
    qrels: Qrels = {}
    first_line: dict[str, int] = {}
    lines = (text for _, text in decoded_lines(path))
    rows = csv.reader(lines, delimiter="\t")
    header = _next_row(rows, path)
    if header is None:
        raise DataError(path, "empty file: expected a header and at least one row", 1)
    if tuple(cell.strip() for cell in header) != QRELS_HEADER:
        expected, got = "\t".join(QRELS_HEADER), "\t".join(header)
        raise DataError(path, f"expected header {expected!r}, got {got!r}", 1)
    while True:
        line = rows.line_num + 1  # where the row starts (a quoted cell may span lines)
        row = _next_row(rows, path)
        if row is None:
            break
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) != 3:
            raise DataError(path, f"expected 3 tab-separated fields, got {len(row)}", line)
        query_id, doc_id, raw_score = (cell.strip() for cell in row)
        for name, value in zip(QRELS_HEADER, (query_id, doc_id, raw_score)):
            if not value:
                raise DataError(path, "empty", line, name)
        check_id(path, line, query_id, "query-id")
        check_id(path, line, doc_id, "corpus-id")
        try:
            score = int(raw_score)
        except ValueError:
            raise DataError(path, f"expected an integer, got {raw_score[:40]!r}", line,
                            "score") from None
        if not -MAX_GRADE <= score <= MAX_GRADE:
            raise DataError(path, f"expected a grade between -{MAX_GRADE} and {MAX_GRADE}, "
                                  f"got {raw_score[:40]}", line, "score")
        if query_ids is not None and query_id not in query_ids:
            raise DataError(path, f"unknown query id '{query_id}' (not in queries.jsonl)",
                            line, "query-id")
        if corpus_ids is not None and doc_id not in corpus_ids:
            raise DataError(path, f"unknown corpus id '{doc_id}' (not in corpus.jsonl)",
                            line, "corpus-id")
        judged = qrels.setdefault(query_id, {})
        if doc_id in judged:
            raise DataError(path, f"duplicate judgment for ({query_id}, {doc_id})", line,
                            "corpus-id")
        judged[doc_id] = score
        first_line.setdefault(query_id, line)
    if not qrels:
        raise DataError(path, "empty split: no judgments after the header")
    return qrels, first_line


def check_relevance(qrels: Qrels, path: str | os.PathLike, rule: RelevanceRule,
                    first_line: dict[str, int] | None = None, *,
                    require_anchor: bool = True, warn: bool = True) -> None:
    """A split must have a relevant passage under ``rule`` for some query (else every
    metric is 0 and training has no rows), and, with ``require_anchor``, for every query;
    without it, queries lacking one are counted in a warning (with ``warn``)."""
    missing = [q for q, judged in qrels.items()
               if not any(rule.is_relevant(grade) for grade in judged.values())]
    if missing and len(missing) == len(qrels):
        grades = sorted({g for judged in qrels.values() for g in judged.values()})
        raise DataError(path, f"no query has a relevant passage under the relevance rule "
                              f"{rule.describe()}; the grades here are "
                              f"{', '.join(map(str, grades))}: choose the relevant grade with "
                              "--relevant-from N (data.relevant_from)")
    if missing and require_anchor:
        query_id = missing[0]
        raise DataError(path, f"query '{query_id}' has no anchor (no passage graded >= "
                              f"{rule.relevant_from}, relevance rule {rule.name}); --lenient "
                              "keeps such queries (the binary metrics skip them), "
                              "--relevant-from N chooses the relevant grade",
                        (first_line or {}).get(query_id), "score")
    if missing and warn:
        logger.warning("%s: %d of %d queries have no passage graded >= %d (relevance rule %s): "
                       "binary nDCG@10, MRR@10 and recall@100 average over the other %d",
                       path, len(missing), len(qrels), rule.relevant_from, rule.name,
                       len(qrels) - len(missing))


def _next_row(rows, path: Path) -> list[str] | None:
    try:
        return next(rows, None)
    except csv.Error as err:  # e.g. a cell over csv's field size limit
        raise DataError(path, f"not a tab-separated row ({err})", rows.line_num) from None


def _require_file(path: Path) -> None:
    if path.is_file():
        return
    if path.is_symlink() and not path.exists():
        raise DataError(path, "a symbolic link that leads nowhere (a loop or a missing target)")
    if path.exists():
        raise DataError(path, "not a regular file (a folder, FIFO or device)")
    raise DataError(path, "file not found")


def strictness(lenient: bool) -> dict[str, bool]:
    """``--lenient`` / ``data.lenient`` as the loaders' keywords: strict (FormBench)
    requires an anchor per query and refuses empty texts; lenient (public BEIR sets)
    allows both. Use as ``load_data(..., **strictness(lenient))``."""
    return {"require_anchor": not lenient, "allow_empty": bool(lenient)}


def load_beir_folder(folder: str | os.PathLike, splits: Iterable[str] = SPLITS, *,
                     require_anchor: bool = True, relevant_from: int | str = "auto",
                     allow_empty: bool = False, leaks: LeakPolicy = "warn",
                     corpus: Mapping[str, Passage] | None = None) -> BeirDataset:
    """Load and validate a local BEIR folder (:func:`tapt.data.sources.load_data` also
    opens Hub datasets and Arrow corpora). FormBench is held to the strict defaults; other
    BEIR sets usually need ``require_anchor=False, allow_empty=True`` (``--lenient``).

    Args:
        folder: The folder holding ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/``.
        splits: The qrels files to read (``qrels/{split}.tsv``); each must exist.
        require_anchor: Every query must have a relevant passage; False keeps queries
            without one (the binary metrics skip them).
        relevant_from: ``auto`` or the lowest relevant grade (:mod:`tapt.data.relevance`).
        allow_empty: Keep passages whose text is empty.
        leaks: A query also judged in another qrels file: ``error`` or ``warn``.
        corpus: The folder's corpus already read and validated; None reads the file.

    Returns:
        The validated :class:`BeirDataset`.

    Raises:
        DataError: a missing file or an invalid line (naming file, line and field); a
            query judged in two loaded splits, or with ``leaks="error"`` in another file.

    Example::

        dataset = load_beir_folder("data/scifact", ["test"], require_anchor=False,
                                   allow_empty=True)
        len(dataset.corpus), len(dataset.split("test"))  # (5183, 300)
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(folder, "not a folder (expected corpus.jsonl, queries.jsonl, qrels/)")
    if corpus is None:
        corpus = read_corpus(folder / "corpus.jsonl", allow_empty=allow_empty)
    queries = read_queries(folder / "queries.jsonl")
    files = {split: folder / "qrels" / f"{split}.tsv" for split in splits}
    parsed = {split: parse_qrels(path, corpus, queries) for split, path in files.items()}
    loaded = {path.name for path in files.values()}
    others = {str(path): read_judged_ids(path)
              for path in sorted((folder / "qrels").glob("*.tsv")) if path.name not in loaded}
    dataset = build_dataset(corpus, queries, parsed, files, others, source=str(folder),
                            require_anchor=require_anchor, relevant_from=relevant_from,
                            leaks=leaks)
    dataset.content_files = {"corpus": (str(folder / "corpus.jsonl"),),
                             "queries": (str(folder / "queries.jsonl"),)}
    return dataset


def build_dataset(corpus: dict[str, Passage], queries: dict[str, str],
                  parsed: dict[str, tuple[Qrels, dict[str, int]]],
                  files: dict[str, str | os.PathLike],
                  others: dict[str, tuple[set[str], int | None]], *, source: str,
                  require_anchor: bool = True, relevant_from: int | str = "auto",
                  leaks: LeakPolicy = "warn") -> BeirDataset:
    """The dataset from validated parts: ``parsed`` (:func:`parse_qrels` per split) and
    ``others`` (:func:`read_judged_ids` of the qrels files not loaded, by file). Chooses the
    relevance rule, checks every split against it and the splits against each other."""
    qrels = {split: judged for split, (judged, _) in parsed.items()}
    grades = [max_grade(qrels.values()), *(grade for _, grade in others.values())]
    top = max((grade for grade in grades if grade is not None), default=None)
    rule = choose_rule(relevant_from, top)
    for split, (judged, first_line) in parsed.items():
        check_relevance(judged, files[split], rule, first_line, require_anchor=require_anchor)
    check_disjoint_splits(qrels, files)
    check_other_splits(parsed, files, others, leaks)
    if parsed:
        how = (f"chosen by auto: the highest grade is {top}" if relevant_from == "auto"
               else f"from relevant_from {relevant_from}")
        logger.info("%s: relevance rule %s, %s", source, rule.describe(), how)
    return BeirDataset(corpus=corpus, queries=queries, qrels=qrels, source=source, rule=rule,
                       files={split: str(path) for split, path in files.items()})


def write_beir(folder: str | os.PathLike, corpus: dict[str, Passage], queries: dict[str, str],
               qrels: dict[str, Qrels]) -> Path:
    """Write a BEIR folder. Refuses to overwrite a folder that already holds a dataset, and
    ids that :mod:`tapt.util.ids` refuses (what it writes, it reads back)."""
    folder = Path(folder)
    if (folder / "corpus.jsonl").exists() or (folder / "qrels").exists():
        raise FileExistsError(f"{folder} already holds a BEIR dataset; choose another folder "
                              "or remove it first")
    for kind, ids in (("corpus", corpus), ("query", queries),
                      *((f"qrels {split}", {*judged, *(d for docs in judged.values()
                                                       for d in docs)})
                        for split, judged in qrels.items())):
        for value in ids:
            if problem := id_problem(value):
                raise DataError(folder, f"{kind} id {value!r}: {problem}")
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for doc_id, passage in corpus.items():
            handle.write(json.dumps({"_id": doc_id, "title": passage.title,
                                     "text": passage.text}, ensure_ascii=False) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for query_id, text in queries.items():
            handle.write(json.dumps({"_id": query_id, "text": text}, ensure_ascii=False) + "\n")
    for split, judged in qrels.items():
        with (folder / "qrels" / f"{split}.tsv").open("w", encoding="utf-8", newline="") as h:
            writer = csv.writer(h, delimiter="\t", lineterminator="\n")
            writer.writerow(QRELS_HEADER)
            for query_id, docs in judged.items():
                for doc_id, score in docs.items():
                    writer.writerow((query_id, doc_id, score))
    return folder
