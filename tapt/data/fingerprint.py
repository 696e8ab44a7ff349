"""Content fingerprints of the data an evaluation ran on, recorded in every result file
(``evaluated.data_fingerprint``) so that ``tapt compare`` pairs only results on the same data.

The fingerprint of one evaluation is the SHA-256 of the bytes of the files it read, each
streamed once (:func:`tapt.util.digests.file_digest`) and remembered on the dataset for the
rest of the process:

- ``corpus``: ``corpus.jsonl`` (a Hub dataset: the Arrow files ``datasets`` keeps in its
  cache for the corpus split);
- ``queries``: ``queries.jsonl`` (Hub: the queries split's Arrow files);
- ``qrels``: ``qrels/<split>.tsv`` of the evaluated split;
- ``sub_corpus``: the SHA-256 of the evaluated passage ids (one per line, in corpus order)
  when they are a sub-corpus, ``None`` for the whole corpus.

A file's digest is taken the first time it is asked for: ``tapt eval``, ``tapt bm25`` and
``tapt train --test`` ask right after the data is read (:func:`remember_digests`), before
any encoding, so an edit made while a model encodes cannot be recorded as what was
evaluated. A dataset built in memory (no files) has ``None`` for each digest.

Cost: one sequential read of each file, about a second per GB (SHA-256 runs at 1-2 GB/s
with the CPU's SHA extensions); FormBench's corpus (~1M passages) takes seconds against
the hour its encoding takes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence

from tapt.data.beir import BeirDataset
from tapt.util.digests import file_digest

ALGORITHM = "sha256"
ROLES = ("corpus", "queries")
"""The files of a dataset besides the qrels, as :attr:`BeirDataset.content_files` names them."""


def files_digest(paths: Sequence[str | os.PathLike]) -> str:
    """SHA-256 of one file's bytes; for several files (a Hub split's Arrow shards), the
    SHA-256 of their digests in order. Each file is streamed, never held whole, and hashed
    once per process (:func:`tapt.util.digests.file_digest`: the run's input fingerprint
    and its test results read the same corpus)."""
    digests = [file_digest(path) for path in paths]
    if len(digests) == 1:
        return digests[0]
    return hashlib.new(ALGORITHM, b"".join(bytes.fromhex(d) for d in digests)).hexdigest()


def ids_digest(ids: Iterable[str]) -> str:
    """SHA-256 of ``ids``, one per line, in the order given (ids hold no line breaks:
    :mod:`tapt.util.ids`)."""
    digest = hashlib.new(ALGORITHM)
    for item in ids:
        digest.update(item.encode("utf-8") + b"\n")
    return digest.hexdigest()


def _file_roles(dataset: BeirDataset, splits: Iterable[str]) -> dict[str, tuple[str, ...]]:
    roles = {role: tuple(dataset.content_files.get(role, ())) for role in ROLES}
    roles.update({f"qrels/{split}": (dataset.files[split],) for split in splits
                  if split in dataset.files and os.path.isfile(dataset.files[split])})
    return roles


def remember_digests(dataset: BeirDataset, splits: Iterable[str]) -> dict[str, str | None]:
    """The digests of the dataset's corpus, queries and the qrels of ``splits``, taken now
    unless already taken (a file that cannot be read is ``None``)."""
    for role, paths in _file_roles(dataset, splits).items():
        if role not in dataset.digests:
            try:
                dataset.digests[role] = files_digest(paths) if paths else None
            except OSError:
                dataset.digests[role] = None
    return dataset.digests


def data_fingerprint(dataset: BeirDataset, split: str,
                     corpus_ids: Sequence[str]) -> dict[str, str | None]:
    """``{"algorithm", "corpus", "queries", "qrels", "sub_corpus"}`` of an evaluation of
    ``split`` on ``corpus_ids`` (see the module docstring)."""
    digests = remember_digests(dataset, [split])
    whole = len(corpus_ids) == len(dataset.corpus)
    return {"algorithm": ALGORITHM, "corpus": digests.get("corpus"),
            "queries": digests.get("queries"), "qrels": digests.get(f"qrels/{split}"),
            "sub_corpus": None if whole else ids_digest(corpus_ids)}
