"""Convert a classic SMART-format test collection (CISI, CACM, MED, CRAN) into a BEIR folder.

The Glasgow IR group distributes these collections for research
(ir.dcs.gla.ac.uk/resources/test_collections; no formal licence): a documents file
(``CISI.ALL``: ``.I`` id, ``.T`` title, ``.A`` authors, ``.W`` text, ``.X`` citations...),
a queries file (``CISI.QRY``: ``.I`` and ``.W``) and a judgments file (``CISI.REL``: ``query
document 0 0.0`` per line, or ``query 0 document grade`` as MED.REL writes it). This script
writes ``corpus.jsonl`` (title and ``.W`` text), ``queries.jsonl`` (the judged queries' ``.W``)
and ``qrels/{train,dev,test}.tsv`` with a seeded split of the judged queries (60/15/25 % by
default). Judgments without a grade become grade 1 (binary); nothing else is changed.

    python benchmarks/build_classic_collection.py SOURCE_DIR OUT --name CISI --seed 0

Hand-written: neither ``datasets`` nor ``ir_datasets``' offline parts read these files
without a download, and the format is a few lines of parsing. Query ids are the ``.I``
numbers (CISI, CACM, MED); Cranfield's REL numbers its queries by position instead
(``--query-ids position``). The data itself is not part of tapt: build it where it is used.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from pathlib import Path

from tapt.data.beir import DataError, Passage, write_beir

FIELD = re.compile(r"^\.([A-Z])(?:\s+(\S+))?\s*$")


def read_smart(path: Path) -> dict[str, dict[str, str]]:
    """Records of a SMART file: ``.I`` id -> {field letter: text}, lines joined by spaces."""
    records: dict[str, dict[str, str]] = {}
    record: dict[str, list[str]] | None = None
    current = ""
    text = path.read_text(encoding="latin-1").replace("\r\n", "\n")
    for number, line in enumerate(text.split("\n"), 1):
        match = FIELD.match(line)
        if match and match.group(1) == "I":
            key = match.group(2) or ""
            if not key.isdigit() or key in records:
                raise DataError(path, f"bad or repeated record id {key!r}", number, ".I")
            record = {}
            records[key] = record  # type: ignore[assignment]
            current = ""
        elif match and not match.group(2):
            current = match.group(1)
            if record is not None:
                record.setdefault(current, [])
        elif record is not None and current:
            record[current].append(line.strip())
        elif line.strip():
            raise DataError(path, "text before the first .I record", number)
    return {key: {name: " ".join(" ".join(lines).split()) for name, lines in fields.items()}
            for key, fields in records.items()}  # type: ignore[union-attr]


def read_rel(path: Path) -> dict[str, dict[str, int]]:
    """Judgments: query number -> {document number: grade}. ``q d 0 0.0`` lines (CISI, CACM)
    are grade 1; ``q 0 d grade`` lines (MED, TREC) keep their grade; ``q d grade`` lines
    (CRAN) keep theirs."""
    lines = [(n, line.split()) for n, line in
             enumerate(path.read_text(encoding="latin-1").splitlines(), 1) if line.strip()]
    trec = all(len(parts) == 4 and parts[1] == "0" for _, parts in lines)
    judged: dict[str, dict[str, int]] = {}
    for number, parts in lines:
        if len(parts) not in (3, 4) or not all(p.isdigit() for p in parts[:2 + trec]):
            raise DataError(path, f"expected 'query document ...', got {' '.join(parts)!r}",
                            number)
        if trec:
            query, doc, grade = parts[0], parts[2], int(float(parts[3]))
        elif len(parts) == 3:
            query, doc, grade = parts[0], parts[1], int(parts[2])
        else:
            query, doc, grade = parts[0], parts[1], 1
        judged.setdefault(query, {})[doc] = max(grade, 1)
    return judged


def split_queries(ids: list[str], fractions: tuple[float, float, float],
                  seed: int) -> dict[str, list[str]]:
    """A seeded shuffle of the judged query ids cut into train/dev/test."""
    order = sorted(ids, key=int)
    random.Random(seed).shuffle(order)
    n_dev = round(len(order) * fractions[1])
    n_test = round(len(order) * fractions[2])
    return {"test": order[:n_test], "dev": order[n_test:n_test + n_dev],
            "train": order[n_test + n_dev:]}


def build(source: Path, out: Path, name: str, seed: int,
          fractions: tuple[float, float, float], query_ids: str) -> dict[str, int]:
    """Read ``NAME.ALL``, ``NAME.QRY``, ``NAME.REL`` from ``source``; write the BEIR folder."""
    documents = read_smart(source / f"{name}.ALL")
    queries = read_smart(source / f"{name}.QRY")
    if query_ids == "position":
        queries = {str(i): fields for i, fields in enumerate(queries.values(), 1)}
    judged = read_rel(source / f"{name}.REL")
    for query, docs in judged.items():
        if query not in queries:
            raise DataError(source / f"{name}.REL", f"query {query} is not in {name}.QRY")
        if unknown := sorted(set(docs) - set(documents), key=int):
            raise DataError(source / f"{name}.REL", f"query {query}: unknown documents "
                            f"{unknown[:5]}")
    corpus = {f"d{key}": Passage(text=fields.get("W", ""), title=fields.get("T", ""))
              for key, fields in documents.items()}
    splits = split_queries(list(judged), fractions, seed)
    qrels = {split: {f"q{q}": {f"d{d}": g for d, g in judged[q].items()} for q in ids}
             for split, ids in splits.items()}
    kept = {f"q{q}": queries[q].get("W", "") for ids in splits.values() for q in ids}
    write_beir(out, corpus, kept, qrels)
    return {"documents": len(corpus), **{f"{s} queries": len(i) for s, i in splits.items()},
            "judgments": sum(len(d) for d in judged.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="folder with NAME.ALL, NAME.QRY, NAME.REL")
    parser.add_argument("out", type=Path, help="BEIR folder to write (must not exist)")
    parser.add_argument("--name", default="CISI", help="file stem (CISI, CACM, MED, CRAN)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the query split")
    parser.add_argument("--split", default="60,15,25", help="train,dev,test percentages")
    parser.add_argument("--query-ids", choices=("id", "position"), default="id",
                        help="REL query numbers are the .I ids, or positions (Cranfield)")
    args = parser.parse_args(argv)
    try:
        parts = [float(p) for p in args.split.split(",")]
        if len(parts) != 3 or abs(sum(parts) - 100) > 1e-6:
            raise ValueError
    except ValueError:
        print(f"error: --split {args.split!r}: three percentages summing to 100",
              file=sys.stderr)
        return 2
    try:
        counts = build(args.source, args.out, args.name, args.seed,
                       tuple(p / 100 for p in parts), args.query_ids)  # type: ignore[arg-type]
    except (DataError, FileExistsError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(", ".join(f"{value} {key}" for key, value in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
