"""benchmarks/build_classic_collection.py: SMART files (CISI, MED) to a BEIR folder tapt reads."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tapt.data.beir import DataError, load_beir_folder

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "build_classic_collection.py"
spec = importlib.util.spec_from_file_location("build_classic_collection", SCRIPT)
classic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(classic)


def _collection(folder: Path, rel: str) -> Path:
    docs = "".join(f".I {i}\r\n.T\r\nTitle {i}\r\n.A\r\nAuthor, A.\r\n.W\r\n  Text of\r\n"
                   f"document {i}.\r\n.X\r\n1\t5\t1\r\n" for i in range(1, 9))
    queries = "".join(f".I {i}\n.W\nquery number {i}?\n" for i in range(1, 6))
    (folder / "CISI.ALL").write_text(docs, encoding="latin-1")
    (folder / "CISI.QRY").write_text(queries, encoding="latin-1")
    (folder / "CISI.REL").write_text(rel, encoding="latin-1")
    return folder


def test_cisi_style_collection_becomes_a_seeded_beir_split(tmp_path):
    rel = "".join(f"    {q}     {d}\t0\t0.000000\n" for q in (1, 2, 3, 4) for d in (q, q + 1))
    source = _collection(tmp_path, rel)
    counts = classic.build(source, tmp_path / "out", "CISI", 0, (0.5, 0.25, 0.25), "id")
    assert counts["judgments"] == 8 and counts["documents"] == 8
    data = load_beir_folder(tmp_path / "out")
    assert data.corpus["d3"].title == "Title 3"
    assert data.corpus["d3"].text == "Text of document 3."  # .A and .X are not text
    assert "q5" not in data.queries  # unjudged queries are left out
    split_ids = [set(data.split(s)) for s in ("train", "dev", "test")]
    assert [len(ids) for ids in split_ids] == [2, 1, 1]
    assert set().union(*split_ids) == {"q1", "q2", "q3", "q4"}
    assert data.split("train")[next(iter(split_ids[0]))] in ({"d1": 1, "d2": 1},
                                                              {"d2": 1, "d3": 1},
                                                              {"d3": 1, "d4": 1},
                                                              {"d4": 1, "d5": 1})
    again = classic.build(source, tmp_path / "again", "CISI", 0, (0.5, 0.25, 0.25), "id")
    assert again == counts
    assert (tmp_path / "again" / "qrels" / "test.tsv").read_text() == \
        (tmp_path / "out" / "qrels" / "test.tsv").read_text()


def test_med_style_rel_keeps_grades_and_unknown_documents_are_named(tmp_path):
    source = _collection(tmp_path, "1 0 2 1\n1 0 3 2\n2 0 4 1\n3 0 5 1\n")
    assert classic.read_rel(source / "CISI.REL") == {"1": {"2": 1, "3": 2}, "2": {"4": 1},
                                                     "3": {"5": 1}}
    (source / "CISI.REL").write_text("1 99 0 0.0\n", encoding="latin-1")
    with pytest.raises(DataError, match=r"query 1: unknown documents \['99'\]"):
        classic.build(source, tmp_path / "out", "CISI", 0, (0.6, 0.15, 0.25), "id")
