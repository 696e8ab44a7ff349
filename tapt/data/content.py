"""What a file made from a dataset records about it, and the check when it is read back.

``tapt score`` and ``tapt mine`` write, beside their output, a digest record
(:func:`tapt.util.digests.write_sidecar`, ``NAME.digest.json``) holding the file's own digest and
:func:`made_from`: the content digests of the data it was made from (the corpus, the
queries, the split's qrels) and the split. :func:`check_made_from` is what a reader calls
first: the file must still be what was written, and the dataset it is used with must be
the one it was made from; else a :class:`~tapt.data.beir.DataError` naming the file and
what differs. A file without a record (made by hand, or by another tool) is read
unchecked, with a warning naming it (shown under ``--quiet`` too).

The corpus, the queries and the split's qrels are digested as the files they were read from
(one streamed pass each; the Arrow store has the corpus's digest already), so the digests
do not depend on the store or on the folder's path; what was not read from a local file (a
Hub dataset's corpus and queries, a dataset built in code) is digested as its content.
"""

from __future__ import annotations

import hashlib
import json
import logging
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path

from tapt.data.beir import BeirDataset, DataError
from tapt.data.overlap import decontamination_of
from tapt.util.digests import (
    ALGORITHM,
    DigestMismatch,
    file_digest,
    mismatch,
    read_sidecar,
    sidecar_path,
)

logger = logging.getLogger(__name__)


def _content_digest(items: Iterable) -> str:
    digest = hashlib.new(ALGORITHM)
    for item in items:
        digest.update(json.dumps(item, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return digest.hexdigest()


def _local(dataset: BeirDataset, name: str) -> Path | None:
    file = Path(dataset.source) / name if dataset.source else None
    return file if file is not None and file.is_file() else None


def corpus_digest(dataset: BeirDataset) -> str:
    """The corpus file's digest (local folder), else a digest of its passages by id."""
    known = getattr(dataset.corpus, "source_digest", None)
    if known:
        return known
    file = _local(dataset, "corpus.jsonl")
    if file is not None:
        return file_digest(file)
    corpus = dataset.corpus
    return "content:" + _content_digest(
        (doc_id, corpus[doc_id].title, corpus[doc_id].text) for doc_id in sorted(corpus))


_KNOWN: dict[int, tuple[weakref.ref, dict[str, dict[str, str]]]] = {}
"""Digests already made of a dataset object, by split (a training reads its mined and its
teacher file against one dataset: the corpus is read once)."""


def dataset_digests(dataset: BeirDataset, split: str) -> dict[str, str]:
    """``{"corpus", "queries", "qrels"}`` digests of ``dataset`` for ``split``: of their
    files where it was read from files (a split carved from a file's queries in memory is
    still that file's), else of their content. Made once per dataset object and split."""
    key = id(dataset)
    known = _KNOWN.get(key)
    if known is None or known[0]() is not dataset:
        known = (weakref.ref(dataset, lambda _: _KNOWN.pop(key, None)), {})
        _KNOWN[key] = known
    if split not in known[1]:
        known[1][split] = _digests(dataset, split)
    return dict(known[1][split])


def _digests(dataset: BeirDataset, split: str) -> dict[str, str]:
    queries, qrels = dataset.queries, dataset.split(split)
    queries_file = _local(dataset, "queries.jsonl")
    qrels_file = Path(dataset.files[split]) if split in dataset.files else None
    return {
        "corpus": corpus_digest(dataset),
        "queries": file_digest(queries_file) if queries_file is not None else
        "content:" + _content_digest((query_id, queries[query_id])
                                     for query_id in sorted(queries)),
        "qrels": file_digest(qrels_file) if qrels_file is not None and qrels_file.is_file()
        else "content:" + _content_digest((query_id, doc_id, grade)
                                           for query_id in sorted(qrels)
                                           for doc_id, grade in sorted(qrels[query_id].items())),
    }


def made_from(dataset: BeirDataset, split: str) -> dict:
    """What a file made from ``split`` of ``dataset`` records about it (its sidecar's
    ``data``, ``split`` and ``source`` fields)."""
    record = {"data": dataset_digests(dataset, split), "split": split,
              "source": dataset.source}
    if (decontaminated := decontamination_of(dataset, split)) is not None:
        record["decontaminated"] = decontaminated
    return record


def unchanged_record(path: Path, *, made_by: str) -> dict | None:
    """The digest record of the file at ``path``, the file unchanged since ``made_by`` wrote
    it (a damaged record or a changed file: a :class:`~tapt.data.beir.DataError` naming
    it); None when it has none, said in a warning shown under ``--quiet`` too."""
    sidecar = sidecar_path(path)
    try:
        record = read_sidecar(path)
    except DigestMismatch as err:
        raise DataError(path, f"its digest record {sidecar.name} is damaged ({err.reason}); "
                              f"make the file again with {made_by}") from None
    if record is None:
        logger.warning("%s has no digest record (%s): made outside %s, it is not checked "
                       "against the data (neither changes since it was made nor the data it "
                       "was made from); make it again with %s to check it", path,
                       sidecar.name, made_by, made_by)
        return None
    problem = mismatch(path, record)
    if problem is not None:
        raise DataError(path, f"{problem} since {made_by} wrote it (its digest record is "
                              f"{sidecar.name}); make it again with {made_by}, or delete "
                              f"{sidecar.name} to use the file as it is")
    return record


def check_made_from(path: str | Path, dataset: BeirDataset, split: str, *,
                    made_by: str) -> dict | None:
    """Check the file at ``path`` against its digest record: unchanged since ``made_by``
    (e.g. ``tapt score``) wrote it, made from this ``dataset`` and ``split``. Returns the
    record (None: the file has none, it is not checked, and a warning naming it says so,
    shown under ``--quiet`` too); raises a :class:`~tapt.data.beir.DataError` naming the
    file otherwise."""
    path = Path(path)
    record = unchanged_record(path, made_by=made_by)
    if record is None:
        return None
    sidecar = sidecar_path(path)
    if record.get("split") not in (None, split):
        raise DataError(path, f"made from the {record.get('split')!r} split, used for the "
                              f"{split!r} split; make it again with {made_by} --split {split}")
    check_same_decontamination(path, record, dataset, split, made_by)
    recorded = record.get("data")
    if not isinstance(record.get("split"), str):
        logger.warning("%s: its digest record %s does not say which split it was made from: "
                       "not checked against the %r split; make it again with %s to check it",
                       path, sidecar.name, split, made_by)
    if not isinstance(recorded, Mapping):
        logger.warning("%s: its digest record %s does not say which data it was made from: "
                       "the file is checked for changes only, not against this data; make it "
                       "again with %s to check both", path, sidecar.name, made_by)
    else:
        current = dataset_digests(dataset, split)
        differ = [name for name in current if recorded.get(name) != current[name]]
        if differ:
            raise DataError(path, f"made from other data ({record.get('source') or '?'}): "
                                  f"its {', '.join(differ)} differ from those of "
                                  f"{dataset.source or 'this dataset'} (split {split}); make "
                                  f"it again with {made_by} on this data")
    return record


def check_same_decontamination(path: Path, record: dict, dataset: BeirDataset, split: str,
                               made_by: str) -> None:
    """A file made from ``split`` decontaminated against some splits is used only with the
    same decontamination (``data.decontaminate``, ``--decontaminate``), and a file made
    without one only without: else a :class:`~tapt.data.beir.DataError` naming both."""
    made, used = record.get("decontaminated"), decontamination_of(dataset, split)
    if made == used:
        return

    def said(value) -> str:
        if not isinstance(value, dict):
            return "not decontaminated"
        against = value.get("against")
        names = against if isinstance(against, list) else [against]
        return f"decontaminated against {', '.join(map(str, names))}"

    again = (f" --decontaminate {' '.join(used['against'])}" if used else "")
    raise DataError(path, f"made from the {split} split {said(made)}, used with it "
                          f"{said(used)}: the queries and passages differ; make it again "
                          f"with {made_by}{again} (as data.decontaminate says)")


__all__ = ["check_made_from", "check_same_decontamination", "corpus_digest", "dataset_digests", "made_from"]
