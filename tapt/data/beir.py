"""Load, validate and write BEIR-format retrieval datasets (FormBench's format).

A BEIR folder holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl``
(``_id``, ``text``) and ``qrels/{split}.tsv`` (header ``query-id  corpus-id  score``).
FormBench grades its qrels: 3 = anchor, 2 = hard negative, 1 = soft negative.

BEIR's own loader (``beir.datasets.data_loader``) skips validation and keeps the whole
package's dependencies; this module is small, checks every line before use and reports
``file:line: field: problem`` so that bad input fails before any training starts.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ANCHOR = 3
HARD_NEGATIVE = 2
SOFT_NEGATIVE = 1
SPLITS = ("train", "dev", "test")
QRELS_HEADER = ("query-id", "corpus-id", "score")
MAX_LINE_BYTES = 32 * 2**20
"""A longer line is refused (a corpus line is one passage; this bounds the memory a
file without line ends can take)."""
MAX_GRADE = 1000
"""qrels scores must lie in [-MAX_GRADE, MAX_GRADE]: trec_eval allocates memory per grade
level (a score of 2**31 takes over 16 GB)."""
UTF8_BOM = b"\xef\xbb\xbf"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")

Qrels = dict[str, dict[str, int]]
"""query id -> {corpus id -> graded relevance}."""


class DataError(ValueError):
    """Invalid dataset input. The message names the file, the line and the field."""

    def __init__(self, path: str | os.PathLike, message: str, line: int | None = None,
                 field_name: str | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.field = field_name
        where = self.path if line is None else f"{self.path}:{line}"
        what = f"field '{field_name}': " if field_name else ""
        super().__init__(f"{where}: {what}{message}")


@dataclass
class Passage:
    """One corpus passage."""

    text: str
    title: str = ""

    def as_text(self, with_title: bool = True) -> str:
        """``title + " " + text`` when there is a title (the BEIR convention), else text."""
        if with_title and self.title:
            return f"{self.title} {self.text}"
        return self.text


@dataclass
class BeirDataset:
    """A corpus, its queries and graded qrels per split, all validated."""

    corpus: dict[str, Passage]
    queries: dict[str, str]
    qrels: dict[str, Qrels] = field(default_factory=dict)
    source: str = ""

    def split(self, name: str) -> Qrels:
        """The qrels of one split; a clear error when it was not loaded."""
        if name not in self.qrels:
            raise KeyError(f"split '{name}' not loaded from {self.source}; "
                           f"available: {sorted(self.qrels)}")
        return self.qrels[name]

    def judged_ids(self, split: str) -> set[str]:
        """Every corpus id that carries a judgment in ``split``."""
        return {doc for docs in self.split(split).values() for doc in docs}


def decoded_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` pairs of a UTF-8 file with LF or CRLF line ends (a UTF-8 BOM
    at its start is skipped). An error names the line for bytes that are not UTF-8 (UTF-16
    included), a NUL byte, a lone CR, a BOM further on, or a line over ``MAX_LINE_BYTES``."""
    limit = MAX_LINE_BYTES
    try:
        handle = path.open("rb")
    except OSError as err:
        raise DataError(path, f"cannot read ({err.strerror or err})") from None
    with handle:
        for number, raw in enumerate(iter(lambda: handle.readline(limit + 1), b""), start=1):
            if len(raw) > limit:
                raise DataError(path, f"line longer than {limit:,} bytes", number)
            if number == 1 and raw.startswith((b"\xff\xfe", b"\xfe\xff")):
                raise DataError(path, "UTF-16 or UTF-32 text (byte-order mark); save it as "
                                      "UTF-8", number)
            if raw.startswith(UTF8_BOM):
                if number > 1:
                    raise DataError(path, "a UTF-8 byte-order mark starts the line (files "
                                          "concatenated?)", number)
                raw = raw[len(UTF8_BOM):]
            if b"\x00" in raw:
                column = raw.index(b"\x00") + 1
                raise DataError(path, f"NUL byte at byte {column} (a binary or UTF-16 file?)",
                                number)
            if b"\r" in raw.rstrip(b"\r\n"):
                raise DataError(path, "carriage return inside the line (CR-only line ends? "
                                      "use LF or CRLF)", number)
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataError(path, f"not valid UTF-8 (byte {err.start + 1})", number) from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    for number, raw in decoded_lines(path):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as err:
            raise DataError(path, f"malformed JSON ({err.msg} at column {err.colno})",
                            number) from None
        except RecursionError:
            raise DataError(path, "malformed JSON (nested too deeply)", number) from None
        except ValueError as err:  # e.g. an integer over Python's 4,300-digit limit
            raise DataError(path, f"malformed JSON ({str(err).split(':')[0]})", number) from None
        if not isinstance(record, dict):
            raise DataError(path, "expected a JSON object", number)
        yield number, record


def string_field(path: str | os.PathLike, line: int, record: dict, name: str, *, required: bool = True,
                  allow_empty: bool = False) -> str:
    if name not in record or record[name] is None:
        if required:
            raise DataError(path, "missing", line, name)
        return ""
    value = record[name]
    if isinstance(value, int) and not isinstance(value, bool) and name == "_id":
        value = str(value)
    if not isinstance(value, str):
        raise DataError(path, f"expected a string, got {type(value).__name__}", line, name)
    if name == "_id" and _CONTROL.search(value):
        raise DataError(path, f"control character {_CONTROL.search(value).group()!r} (tab, "
                              "newline, NUL...): an id must fit in one TSV cell", line, name)
    if not value.isascii() and _SURROGATE.search(value):  # isascii: the fast common case
        raise DataError(path, f"lone surrogate {_SURROGATE.search(value).group()!r}: not "
                              "encodable as UTF-8", line, name)
    if not allow_empty and not value.strip():
        raise DataError(path, "empty", line, name)
    return value


def read_corpus(path: str | os.PathLike, *, allow_empty: bool = False) -> dict[str, Passage]:
    """Read and validate ``corpus.jsonl``; ``title`` is optional and may be empty."""
    path = Path(path)
    _require_file(path)
    return parse_corpus(iter_jsonl(path), path, allow_empty=allow_empty)


def parse_corpus(records: Iterable[tuple[int, dict]], source: str | os.PathLike, *,
                 allow_empty: bool = False) -> dict[str, Passage]:
    """Validate ``(line, record)`` pairs of a corpus; ``source`` names them in errors.

    ``allow_empty`` keeps passages whose text is empty (some public BEIR sets have them)."""
    corpus: dict[str, Passage] = {}
    first_line: dict[str, int] = {}
    for line, record in records:
        doc_id = string_field(source, line, record, "_id")
        text = string_field(source, line, record, "text", allow_empty=allow_empty)
        title = string_field(source, line, record, "title", required=False, allow_empty=True)
        if doc_id in corpus:
            raise DataError(source, f"duplicate id '{doc_id}' (first on line "
                                    f"{first_line[doc_id]})", line, "_id")
        corpus[doc_id] = Passage(text=text, title=title)
        first_line[doc_id] = line
    if not corpus:
        raise DataError(source, "no passages")
    return corpus


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
               anchor_score: int = ANCHOR) -> Qrels:
    """Read and validate one ``qrels/{split}.tsv``.

    Checks the header, integer scores, duplicate pairs, ids unknown to the corpus or the
    queries (when given), empty splits, and, with ``require_anchor``, that every query has
    at least one passage graded ``anchor_score`` or higher.
    """
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
    if require_anchor:
        for query_id, judged in qrels.items():
            if max(judged.values()) < anchor_score:
                raise DataError(path, f"query '{query_id}' has no anchor (no passage graded "
                                      f">= {anchor_score})", first_line[query_id], "score")
    return qrels


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


def load_beir_folder(folder: str | os.PathLike, splits: Iterable[str] = SPLITS, *,
                     require_anchor: bool = True, anchor_score: int = ANCHOR,
                     allow_empty: bool = False) -> BeirDataset:
    """Load and validate a local BEIR folder; ``splits`` are the qrels files to read.

    FormBench is held to the strict rules. For other BEIR sets, ``allow_empty`` keeps empty
    passages and ``require_anchor=False`` keeps queries with no passage graded
    ``anchor_score`` (they score 0 on the binary metrics)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(folder, "not a folder (expected corpus.jsonl, queries.jsonl, qrels/)")
    corpus = read_corpus(folder / "corpus.jsonl", allow_empty=allow_empty)
    queries = read_queries(folder / "queries.jsonl")
    files = {split: folder / "qrels" / f"{split}.tsv" for split in splits}
    qrels = {split: read_qrels(path, corpus, queries, require_anchor=require_anchor,
                               anchor_score=anchor_score) for split, path in files.items()}
    check_disjoint_splits(qrels, files)
    return BeirDataset(corpus=corpus, queries=queries, qrels=qrels, source=str(folder))


def check_disjoint_splits(qrels: dict[str, Qrels], files: dict[str, str | os.PathLike]) -> None:
    """No query may be judged in two splits (training on dev or test queries leaks)."""
    owner: dict[str, str] = {}
    for split, judged in qrels.items():
        for query_id in judged:
            if query_id in owner:
                path = Path(files[split])
                line = next((number for number, text in decoded_lines(path)
                             if text.split("\t", 1)[0].strip() == query_id), None)
                raise DataError(path, f"query '{query_id}' is also judged in split "
                                      f"'{owner[query_id]}' ({files[owner[query_id]]})",
                                line, "query-id")
            owner[query_id] = split


def write_beir(folder: str | os.PathLike, corpus: dict[str, Passage], queries: dict[str, str],
               qrels: dict[str, Qrels]) -> Path:
    """Write a BEIR folder. Refuses to overwrite a folder that already holds a dataset."""
    folder = Path(folder)
    if (folder / "corpus.jsonl").exists() or (folder / "qrels").exists():
        raise FileExistsError(f"{folder} already holds a BEIR dataset; choose another folder "
                              "or remove it first")
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
