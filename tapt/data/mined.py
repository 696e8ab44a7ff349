"""Reading a mined-negatives file (``tapt mine``'s output) for training, validated.

Every line must be a JSON object with a ``query_id`` of the training split and a
``negatives`` list of objects whose ``id`` is a corpus passage that is not an anchor of
that query (relevant under the dataset's relevance rule, whatever its grade) nor a copy of
one (a passage whose text, as training encodes it, is identical to an anchor's: the same
passage under another id); ids follow :mod:`tapt.util.ids`;
``rank`` and ``score``, when present, must be numbers. A bad line is an error naming the
file, the line and the field, raised before any model is loaded. First, the digest record
``tapt mine`` writes beside the file is checked (:func:`tapt.data.content.check_made_from`):
a file changed since, or mined from other data or another split, is refused naming it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from tapt.data.beir import BeirDataset, DataError, Passage
from tapt.data.content import check_made_from
from tapt.data.lines import check_id, iter_jsonl
from tapt.data.splits import carved_off, dev_passages
from tapt.util.finite import finite_number

logger = logging.getLogger(__name__)


def anchor_texts(corpus: Mapping[str, Passage], anchors: Sequence[str],
                 with_title: bool = True) -> dict[str, str]:
    """``{text: anchor id}`` of ``anchors``' texts as encoded (``title text`` unless
    ``with_title`` is False): a passage with one of these texts is that anchor again."""
    return {corpus[doc_id].as_text(with_title): doc_id for doc_id in anchors}


def read_mined(path: str | Path, dataset: BeirDataset, split: str, *,
               with_title: bool = True) -> dict[str, list[str]]:
    """``{query_id: [negative ids, in file order]}`` for the queries of ``split``. Lines of
    queries carved off ``split`` into a dev split (``data.dev_from_train``) are skipped:
    the file was mined for the whole train split; so are the negatives that are relevant
    passages of those dev queries (counted in a log line), so that dev measures passages
    training never saw. A passage held out by ``data.decontaminate`` is refused (the file
    was mined without the decontamination; its record says so unless it has none).
    ``with_title``: how training encodes passages (``data.with_title``), for telling copies
    of an anchor."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "mined-negatives file not found (make it with tapt mine)")
    check_made_from(path, dataset, split, made_by="tapt mine")
    qrels = dataset.split(split)
    skipped = carved_off(dataset, split)
    dev_held = dev_passages(dataset, split)
    dropped = 0
    mined: dict[str, list[str]] = {}
    for line, record in iter_jsonl(path):
        query_id = record.get("query_id")
        if not isinstance(query_id, str) or not query_id:
            raise DataError(path, "expected a non-empty string", line, "query_id")
        check_id(path, line, query_id, "query_id")
        if query_id not in dataset.queries:
            raise DataError(path, f"unknown query {query_id!r}", line, "query_id")
        if query_id not in qrels and query_id in skipped:
            continue  # mined for the train split before its dev queries were carved off
        if query_id not in qrels:
            raise DataError(path, f"query {query_id!r} is not in the {split} split", line,
                            "query_id")
        if query_id in mined:
            raise DataError(path, f"query {query_id!r} appears twice", line, "query_id")
        negatives = record.get("negatives")
        if not isinstance(negatives, list):
            raise DataError(path, "expected a list", line, "negatives")
        anchors = set(dataset.rule.relevant_ids(qrels[query_id]))  # every relevant grade
        copies = anchor_texts(dataset.corpus, sorted(anchors), with_title)
        ids = []
        for position, negative in enumerate(negatives):
            field = f"negatives[{position}]"
            if not isinstance(negative, dict):
                raise DataError(path, "expected an object with an id", line, field)
            doc_id = negative.get("id")
            if isinstance(doc_id, str) and doc_id:
                check_id(path, line, doc_id, f"{field}.id")
            if not isinstance(doc_id, str) or doc_id not in dataset.corpus:
                raise DataError(path, f"unknown passage {doc_id!r}", line, f"{field}.id")
            if doc_id in anchors:
                raise DataError(path, f"passage {doc_id!r} is an anchor of query "
                                      f"{query_id!r}: a positive cannot be a negative", line,
                                f"{field}.id")
            if doc_id in dataset.held_out:
                raise DataError(path, f"passage {doc_id!r} is relevant in a split training is "
                                      "decontaminated against "
                                      f"({', '.join(dataset.decontaminated['against'])}): "
                                      "training must not see it; mine again with tapt mine "
                                      "--decontaminate", line, f"{field}.id")
            copied = copies.get(dataset.corpus[doc_id].as_text(with_title))
            if copied is not None:
                raise DataError(path, f"passage {doc_id!r} has the same text as {copied!r}, an "
                                      f"anchor of query {query_id!r}: a copy of a positive "
                                      "cannot be a negative", line, f"{field}.id")
            for name in ("rank", "score"):
                value = negative.get(name)
                if value is not None and not finite_number(value):
                    raise DataError(path, f"expected a finite number, got {value!r}", line,
                                    f"{field}.{name}")
            if doc_id in ids:
                raise DataError(path, f"passage {doc_id!r} listed twice", line, f"{field}.id")
            ids.append(doc_id)
        kept = [doc_id for doc_id in ids if doc_id not in dev_held]
        dropped += len(ids) - len(kept)
        mined[query_id] = kept
    if not mined:
        raise DataError(path, "no mined negatives (tapt mine writes one line per query)")
    if dropped:
        logger.info("%s: %d mined negatives are relevant passages of the carved dev split; "
                    "left out, so that dev measures passages training never saw", path,
                    dropped)
    return mined
