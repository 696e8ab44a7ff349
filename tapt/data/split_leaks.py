"""Queries judged in two splits: training on a dev or test query leaks into its metrics.

Loading a split also reads the query ids of the other ``qrels/*.tsv`` files present
(:func:`read_judged_ids`, cheaply); a query of a loaded split judged in another file is an
error for training and a warning for evaluation (:func:`check_other_splits`), and one
judged in two loaded splits is always an error (:func:`check_disjoint_splits`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Literal

from tapt.data import lines as line_reader
from tapt.data.lines import DataError, decoded_lines
from tapt.data.relevance import MAX_GRADE
from tapt.util.ids import id_problem

logger = logging.getLogger(__name__)

LeakPolicy = Literal["error", "warn"]
Qrels = dict[str, dict[str, int]]


def read_judged_ids(path: str | os.PathLike) -> tuple[set[str], int | None]:
    """The query ids and the highest grade of a qrels file that is not loaded, cheaply:
    rows that do not parse are skipped (that split's own validation reports them when it
    is loaded); a file that cannot be read gives nothing."""
    path = Path(path)
    ids: set[str] = set()
    top: int | None = None
    if not path.is_file():  # a FIFO or a device would block or never end
        return ids, top
    limit = line_reader.MAX_LINE_BYTES  # read here, so that a patched limit applies
    try:
        with path.open("rb") as handle:
            for raw in iter(lambda: handle.readline(limit + 1), b""):
                cells = raw.decode("utf-8", "replace").rstrip("\r\n").split("\t")
                if len(raw) > limit or len(cells) != 3:
                    continue
                query_id = cells[0].strip().lstrip("\ufeff").strip('"')
                try:
                    grade = int(cells[2].strip())
                except ValueError:  # the header, or a bad row
                    continue
                if query_id and id_problem(query_id) is None and abs(grade) <= MAX_GRADE:
                    ids.add(query_id)
                    top = grade if top is None else max(top, grade)
    except OSError as err:
        logger.debug("%s: not read for the split-leak check (%s)", path, err)
    return ids, top


def check_other_splits(parsed: dict[str, tuple[Qrels, dict[str, int]]],
                       files: dict[str, str | os.PathLike],
                       others: dict[str, tuple[set[str], int | None]],
                       leaks: LeakPolicy = "warn") -> None:
    """Queries of a loaded split that are also judged in another qrels file (not loaded):
    an error naming both files with ``leaks="error"``, else a warning."""
    for split, (judged, first_line) in parsed.items():
        for other, (other_ids, _) in others.items():
            shared = sorted(query_id for query_id in judged if query_id in other_ids)
            if not shared:
                continue
            examples = ", ".join(f"'{query_id}'" for query_id in shared[:5])
            message = (f"{len(shared)} of {len(judged)} queries are also judged in {other} "
                       f"(e.g. {examples})")
            if leaks == "error":
                raise DataError(files[split], f"{message}: training on them leaks into that "
                                              "split's metrics; keep each query in one split "
                                              "(move a file that is not a split out of "
                                              "qrels/)", first_line.get(shared[0]),
                                "query-id")
            logger.warning("%s: %s: its metrics measure queries a model may have been "
                           "trained on", files[split], message)


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
