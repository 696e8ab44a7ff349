"""Every bad BEIR input fails with a DataError naming the file, the line and the field,
and nothing is written when validation fails."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from rich.console import Console

from tapt import cli
from tapt.data.beir import (
    DataError,
    Passage,
    load_beir_folder,
    read_corpus,
    read_qrels,
    read_queries,
    write_beir,
)

HEADER = "query-id\tcorpus-id\tscore\n"


def jsonl(*records) -> str:
    """JSONL text; a ``str`` record is written verbatim (for malformed lines)."""
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def good_corpus_records() -> list[dict]:
    return [{"_id": f"d{i}", "title": f"Title {i}", "text": f"passage number {i}"}
            for i in range(1, 7)]


def good_query_records() -> list[dict]:
    # q1..q6, like the tiny dataset whose qrels (train q1-q2, dev q3, test q4-q6) raw_beir keeps
    return [{"_id": f"q{i}", "text": f"question number {i}"} for i in range(1, 7)]


def check(err: DataError, path: Path, line: int | None, field: str | None = None) -> str:
    """The error names ``path`` (and ``path:line`` and the field when given)."""
    message = str(err)
    assert err.path == str(path)
    assert err.line == line
    assert err.field == field
    if line is None:
        assert message.startswith(f"{path}: ")
    else:
        assert message.startswith(f"{path}:{line}: ")
    if field is not None:
        assert f"field '{field}'" in message
    return message


def load_error(folder: Path, **kwargs) -> DataError:
    with pytest.raises(DataError) as info:
        load_beir_folder(folder, **kwargs)
    return info.value


# --------------------------------------------------------------------------- JSONL files

@pytest.mark.parametrize("part", ["corpus", "queries"])
def test_malformed_json_line(raw_beir, part):
    records = good_corpus_records() if part == "corpus" else good_query_records()
    lines = [json.dumps(r) for r in records]
    lines[1] = lines[1][:-5]  # truncate the object on line 2
    folder = raw_beir(**{part: "\n".join(lines) + "\n"})
    err = load_error(folder)
    message = check(err, folder / f"{part}.jsonl", 2)
    assert "malformed JSON" in message


def test_blank_lines_still_count_in_line_numbers(raw_beir):
    records = good_corpus_records()
    text = jsonl(records[0]) + "\n   \n" + jsonl({"_id": "d2", "title": "x"}, *records[2:])
    folder = raw_beir(corpus=text)
    # line 1: d1, lines 2-3 blank, line 4: d2 without text
    check(load_error(folder), folder / "corpus.jsonl", 4, "text")


@pytest.mark.parametrize("part", ["corpus", "queries"])
@pytest.mark.parametrize("line", ['["d1", "some text"]', '"just a string"', "42", "null"])
def test_non_object_json_line(raw_beir, part, line):
    records = good_corpus_records() if part == "corpus" else good_query_records()
    folder = raw_beir(**{part: jsonl(records[0], records[1], line)})
    message = check(load_error(folder), folder / f"{part}.jsonl", 3)
    assert "expected a JSON object" in message


@pytest.mark.parametrize("part", ["corpus", "queries"])
@pytest.mark.parametrize("field,value,problem", [
    ("_id", None, "missing"),          # key absent
    ("text", None, "missing"),
    ("text", "", "empty"),
    ("text", "   \t ", "empty"),       # whitespace only
    ("text", 5, "expected a string, got int"),
    ("text", ["a", "b"], "expected a string, got list"),
    ("text", {"en": "x"}, "expected a string, got dict"),
    ("_id", "", "empty"),
    ("_id", True, "expected a string, got bool"),
    ("_id", 1.5, "expected a string, got float"),
])
def test_bad_field(raw_beir, part, field, value, problem):
    records = good_corpus_records() if part == "corpus" else good_query_records()
    bad = dict(records[2])
    if value is None:
        del bad[field]
    else:
        bad[field] = value
    records[2] = bad
    folder = raw_beir(**{part: jsonl(*records)})
    message = check(load_error(folder), folder / f"{part}.jsonl", 3, field)
    assert problem in message


def test_json_null_text_is_missing(raw_beir):
    records = good_corpus_records()
    records[4]["text"] = None
    folder = raw_beir(corpus=jsonl(*records))
    assert "missing" in check(load_error(folder), folder / "corpus.jsonl", 5, "text")


def test_non_string_title_is_rejected(raw_beir):
    records = good_corpus_records()
    records[1]["title"] = 7
    folder = raw_beir(corpus=jsonl(*records))
    check(load_error(folder), folder / "corpus.jsonl", 2, "title")


def test_missing_or_empty_title_is_accepted(raw_beir):
    records = good_corpus_records()
    del records[0]["title"]
    records[1]["title"] = ""
    folder = raw_beir(corpus=jsonl(*records))
    dataset = load_beir_folder(folder)
    assert dataset.corpus["d1"] == Passage(text="passage number 1", title="")
    assert dataset.corpus["d2"].as_text() == "passage number 2"


@pytest.mark.parametrize("part", ["corpus", "queries"])
def test_duplicate_id_names_both_lines(raw_beir, part):
    records = good_corpus_records() if part == "corpus" else good_query_records()
    duplicate = dict(records[0], text="another text")
    records.insert(1, {"_id": "extra", "text": "filler"})  # line 2
    records.append(duplicate)                             # last line
    last = len(records)
    folder = raw_beir(**{part: jsonl(*records)})
    message = check(load_error(folder), folder / f"{part}.jsonl", last, "_id")
    assert "duplicate id 'd1'" in message or "duplicate id 'q1'" in message
    assert "first on line 1" in message


@pytest.mark.parametrize("part,what", [("corpus", "no passages"), ("queries", "no queries")])
def test_empty_jsonl_file(raw_beir, part, what):
    folder = raw_beir(**{part: "\n\n"})
    assert what in check(load_error(folder), folder / f"{part}.jsonl", None)


def test_allow_empty_accepts_empty_passages_only(raw_beir):
    records = good_corpus_records()
    records[2]["text"] = ""
    records[3]["text"] = "  "
    folder = raw_beir(corpus=jsonl(*records))
    check(load_error(folder), folder / "corpus.jsonl", 3, "text")
    dataset = load_beir_folder(folder, allow_empty=True)
    assert dataset.corpus["d3"].text == ""
    assert dataset.corpus["d4"].text == "  "
    assert len(dataset.corpus) == 6
    # allow_empty does not make the field optional
    del records[3]["text"]
    folder = raw_beir("missing", corpus=jsonl(*records))
    assert "missing" in check(load_error(folder, allow_empty=True), folder / "corpus.jsonl", 4,
                              "text")


def test_read_corpus_and_queries_directly(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(jsonl({"_id": "a", "text": "x"}, {"_id": "b", "text": ""}), "utf-8")
    with pytest.raises(DataError) as info:
        read_corpus(corpus)
    check(info.value, corpus, 2, "text")
    queries = tmp_path / "q.jsonl"
    queries.write_text(jsonl({"_id": "q", "text": "x"}, "{oops"), "utf-8")
    with pytest.raises(DataError) as info:
        read_queries(queries)
    check(info.value, queries, 2)


# --------------------------------------------------------------------------- qrels

def qrels_text(*rows: str, header: str = HEADER) -> str:
    return header + "".join(row + "\n" for row in rows)


GOOD_TEST_ROWS = ["q4\td1\t3", "q4\td2\t2", "q5\td3\t3", "q6\td5\t3"]


@pytest.mark.parametrize("row,field,problem", [
    ("q9\td1\t3", "query-id", "unknown query id 'q9'"),
    ("q5\td99\t2", "corpus-id", "unknown corpus id 'd99'"),
    ("q5\td4\t2.5", "score", "expected an integer, got '2.5'"),
    ("q5\td4\tx", "score", "expected an integer, got 'x'"),
    ("q5\td4\t ", "score", "empty"),
    ("\td4\t2", "query-id", "empty"),
    ("q5\td1\t3", "corpus-id", "duplicate judgment for (q5, d1)"),
])
def test_bad_qrels_row(raw_beir, row, field, problem):
    # lines: 1 header, 2-3 q4, 4 q5/d1, 5 the bad row, 6+ the rest
    rows = ["q4\td1\t3", "q4\td2\t2", "q5\td1\t3", row, "q6\td5\t3"]
    folder = raw_beir(qrels={"test": qrels_text(*rows)})
    message = check(load_error(folder), folder / "qrels" / "test.tsv", 5, field)
    assert problem in message


@pytest.mark.parametrize("row,count", [("q3\td4", 2), ("q3\td4\t2\textra", 4), ("q3", 1)])
def test_wrong_field_count(raw_beir, row, count):
    folder = raw_beir(qrels={"dev": qrels_text("q3\td5\t3", row)})
    message = check(load_error(folder), folder / "qrels" / "dev.tsv", 3)
    assert f"expected 3 tab-separated fields, got {count}" in message


@pytest.mark.parametrize("header", [
    "qid\tdocid\tscore\n",                # other names
    "query-id corpus-id score\n",         # spaces, not tabs
    "q1\td1\t3\n",                        # no header at all
    "query-id\tcorpus-id\n",              # a column short
])
def test_wrong_header(raw_beir, header):
    folder = raw_beir(qrels={"train": qrels_text("q1\td1\t3", header=header)})
    message = check(load_error(folder), folder / "qrels" / "train.tsv", 1)
    assert "expected header" in message


def test_header_with_surrounding_spaces_is_accepted(raw_beir):
    folder = raw_beir(qrels={"dev": qrels_text("q3\td5\t3",
                                               header="query-id \t corpus-id\tscore\n")})
    assert load_beir_folder(folder).qrels["dev"] == {"q3": {"d5": 3}}


def test_query_without_anchor(raw_beir):
    rows = ["q4\td1\t3", "q5\td4\t2", "q6\td5\t3", "q5\td1\t1"]  # q5: grades 2 and 1 only
    folder = raw_beir(qrels={"test": qrels_text(*rows)})
    # the error points at the query's first judgment (line 3)
    message = check(load_error(folder), folder / "qrels" / "test.tsv", 3, "score")
    assert "query 'q5' has no anchor" in message
    dataset = load_beir_folder(folder, require_anchor=False)
    assert dataset.qrels["test"]["q5"] == {"d4": 2, "d1": 1}
    assert dataset.qrels["test"]["q4"] == {"d1": 3}


def test_relevant_from_option(raw_beir):
    folder = raw_beir(qrels={"test": qrels_text("q4\td1\t2", "q5\td3\t3")})
    check(load_error(folder), folder / "qrels" / "test.tsv", 2, "score")
    assert load_beir_folder(folder, relevant_from=2).qrels["test"]["q4"] == {"d1": 2}


def test_empty_split_header_only(raw_beir):
    folder = raw_beir(qrels={"dev": HEADER + "\n \t \n"})
    assert "empty split" in check(load_error(folder), folder / "qrels" / "dev.tsv", None)


def test_empty_qrels_file(raw_beir):
    folder = raw_beir(qrels={"dev": ""})
    assert "empty file" in check(load_error(folder), folder / "qrels" / "dev.tsv", 1)


def test_only_requested_splits_are_read(raw_beir):
    folder = raw_beir(qrels={"train": "garbage\n"})
    dataset = load_beir_folder(folder, ["dev", "test"])
    assert set(dataset.qrels) == {"dev", "test"}
    check(load_error(folder, splits=["train"]), folder / "qrels" / "train.tsv", 1)


def overlapping_splits(raw_beir) -> tuple[Path, int]:
    """The tiny dataset with q1 (judged in train) also judged in test; the line of q1's
    first judgment in test.tsv."""
    # lines: 1 header, 2 q4, 3 q1 (first), 4 q5, 5 q1 again, 6 q6
    rows = ["q4\td1\t3", "q1\td2\t3", "q5\td3\t3", "q1\td6\t1", "q6\td5\t3"]
    return raw_beir("overlap", qrels={"test": qrels_text(*rows)}), 3


def test_query_judged_in_two_splits(raw_beir):
    folder, line = overlapping_splits(raw_beir)
    train, test = folder / "qrels" / "train.tsv", folder / "qrels" / "test.tsv"
    # the later split's file is named, at the query's first line there
    message = check(load_error(folder), test, line, "query-id")
    assert "query 'q1'" in message
    assert "split 'train'" in message and str(train) in message
    # the lenient options do not allow a leak between splits
    check(load_error(folder, require_anchor=False, allow_empty=True), test, line, "query-id")


def test_read_qrels_without_id_sets_skips_id_checks(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text(qrels_text("qa\tda\t3", "qa\tdb\t0"), "utf-8")
    assert read_qrels(path) == {"qa": {"da": 3, "db": 0}}
    with pytest.raises(DataError) as info:
        read_qrels(path, corpus_ids={"da"})
    check(info.value, path, 3, "corpus-id")


# --------------------------------------------------------------------------- missing files

@pytest.mark.parametrize("missing", ["corpus.jsonl", "queries.jsonl", "qrels/dev.tsv"])
def test_missing_file(beir_folder, missing):
    (beir_folder / missing).unlink()
    message = check(load_error(beir_folder), beir_folder / missing, None)
    assert "file not found" in message


def test_missing_folder(tmp_path):
    folder = tmp_path / "nowhere"
    assert "not a folder" in check(load_error(folder), folder, None)


def test_valid_folder_loads(beir_folder, corpus, queries, qrels):
    dataset = load_beir_folder(beir_folder)
    assert dataset.corpus == corpus
    assert dataset.queries == queries
    assert dataset.qrels == qrels
    assert dataset.source == str(beir_folder)
    assert dataset.judged_ids("dev") == {"d5", "d4", "d1"}
    with pytest.raises(KeyError, match="split 'train' not loaded"):
        load_beir_folder(beir_folder, ["test"]).split("train")


# --------------------------------------------------------------------------- writing

def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_write_beir_round_trip_with_unicode(tmp_path):
    corpus = {"α1": Passage(text="Ti–6Al–4V at 25 °C", title="Alloy ✓")}
    queries = {"q": "Which alloy?"}
    qrels = {"test": {"q": {"α1": 3}}}
    folder = write_beir(tmp_path / "u", corpus, queries, qrels)
    dataset = load_beir_folder(folder, ["test"])
    assert (dataset.corpus, dataset.queries, dataset.qrels) == (corpus, queries, qrels)


@pytest.mark.parametrize("existing", ["corpus.jsonl", "qrels"])
def test_write_beir_refuses_to_overwrite(tmp_path, make_beir, existing):
    folder = make_beir("ds")
    if existing == "qrels":
        (folder / "corpus.jsonl").unlink()
    before = snapshot(folder)
    with pytest.raises(FileExistsError, match="already holds a BEIR dataset"):
        write_beir(folder, {"z": Passage(text="new")}, {"qz": "new?", "qy": "other?"},
                   {"test": {"qz": {"z": 3}}, "extra": {"qy": {"z": 3}}})
    assert snapshot(folder) == before


# --------------------------------------------------------------------------- CLI

@pytest.fixture
def wide_console(monkeypatch):
    """Print CLI messages on one line each, so that paths are not wrapped; undo the
    logging set-up ``cli.main`` does."""
    monkeypatch.setattr(cli.terminal, "console", Console(width=10_000, color_system=None))
    root, tapt_logger = logging.getLogger(), logging.getLogger("tapt")
    handlers, level, tapt_level = root.handlers[:], root.level, tapt_logger.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    tapt_logger.setLevel(tapt_level)


@pytest.fixture
def no_model(monkeypatch):
    """Fail if the CLI tries to load a model or to build a retriever."""
    from tapt.encoders.sentence import SentenceTransformerEncoder
    from tapt.retrieval.bm25 import BM25Retriever

    def refuse(*args, **kwargs):
        raise AssertionError("the CLI did work before validating its inputs")

    monkeypatch.setattr(SentenceTransformerEncoder, "load", classmethod(refuse))
    monkeypatch.setattr(BM25Retriever, "retrieve", refuse)


def bad_folders(raw_beir) -> dict[str, tuple[Path, Path, int]]:
    records = good_corpus_records()
    records[3]["text"] = " "
    corpus_bad = raw_beir("bad-corpus", corpus=jsonl(*records))
    qrels_bad = raw_beir("bad-qrels", qrels={"test": qrels_text("q4\td1\t3", "q5\td42\t3")})
    return {"corpus": (corpus_bad, corpus_bad / "corpus.jsonl", 4),
            "qrels": (qrels_bad, qrels_bad / "qrels" / "test.tsv", 3)}


@pytest.mark.parametrize("command", ["bm25", "eval"])
@pytest.mark.parametrize("which", ["corpus", "qrels"])
def test_cli_writes_nothing_when_validation_fails(tmp_path, raw_beir, capsys, wide_console,
                                                  no_model, command, which):
    folder, bad_file, line = bad_folders(raw_beir)[which]
    out = tmp_path / "out"
    argv = [command, "--data", str(folder), "--split", "test", "--quiet",
            "--output", str(out / "metrics.json"), "--run", str(out / "run.trec")]
    if command == "eval":
        argv += ["--model", "sentence-transformers/all-MiniLM-L6-v2"]
    assert cli.main(argv) == 2
    printed = capsys.readouterr().out
    assert f"{bad_file}:{line}:" in printed
    assert "error" in printed
    assert not out.exists()


def test_cli_validate_reports_file_and_line(raw_beir, capsys, wide_console):
    folder, bad_file, line = bad_folders(raw_beir)["qrels"]
    assert cli.main(["data", "validate", str(folder)]) == 2
    printed = capsys.readouterr().out
    assert f"{bad_file}:{line}: field 'corpus-id': unknown corpus id 'd42'" in printed


def test_cli_validate_refuses_query_judged_in_two_splits(raw_beir, capsys, wide_console):
    folder, line = overlapping_splits(raw_beir)
    assert cli.main(["data", "validate", str(folder)]) == 2
    printed = capsys.readouterr().out
    assert f"{folder / 'qrels' / 'test.tsv'}:{line}: field 'query-id': query 'q1'" in printed
    assert "split 'train'" in printed


def test_cli_validate_accepts_good_folder(beir_folder, capsys, wide_console):
    assert cli.main(["data", "validate", str(beir_folder)]) == 0
    printed = capsys.readouterr().out
    assert "ok" in printed
    assert "6 passages" in printed and "6 queries" in printed
    assert "train (2)" in printed and "dev (1)" in printed and "test (3)" in printed


def test_cli_lenient_accepts_query_without_anchor(raw_beir, capsys, wide_console):
    folder = raw_beir(qrels={"test": qrels_text("q4\td1\t3", "q5\td4\t2")})
    assert cli.main(["data", "validate", str(folder), "--splits", "test"]) == 2
    assert cli.main(["data", "validate", str(folder), "--splits", "test", "--lenient"]) == 0
    # a split in which no query has a relevant passage is refused even with --lenient
    folder = raw_beir("none", qrels={"dev": qrels_text("q3\td4\t2")})
    assert cli.main(["data", "validate", str(folder), "--splits", "dev", "--lenient"]) == 2
    assert "no query has a relevant passage" in capsys.readouterr().out


def test_cli_error_message_keeps_square_brackets(tmp_path, raw_beir, capsys, wide_console):
    records = good_corpus_records()
    records[1]["text"] = ""
    folder = raw_beir("ds[v2]", corpus=jsonl(*records))
    assert cli.main(["data", "validate", str(folder)]) == 2
    assert f"{folder / 'corpus.jsonl'}:2:" in capsys.readouterr().out


def test_cli_error_message_with_closing_tag_text(raw_beir, capsys, wide_console):
    folder = raw_beir(qrels={"test": "[/x]\tcorpus-id\tscore\nq4\td1\t3\n"})
    assert cli.main(["data", "validate", str(folder)]) == 2
    assert f"{folder / 'qrels' / 'test.tsv'}:1:" in capsys.readouterr().out


@pytest.mark.parametrize("existing", ["output", "run"])
def test_cli_refuses_existing_output_before_any_work(tmp_path, beir_folder, capsys,
                                                     wide_console, no_model, monkeypatch,
                                                     existing):
    import tapt.data.sources

    def no_load(*args, **kwargs):
        raise AssertionError("data loaded before the output check")

    monkeypatch.setattr(tapt.data.sources, "load_data", no_load)
    paths = {"output": tmp_path / "metrics.json", "run": tmp_path / "run.trec"}
    paths[existing].write_text("precious\n", encoding="utf-8")
    argv = ["bm25", "--data", str(beir_folder), "--quiet",
            "--output", str(paths["output"]), "--run", str(paths["run"])]
    assert cli.main(argv) == 2
    printed = capsys.readouterr().out
    assert str(paths[existing]) in printed and "--overwrite" in printed
    assert paths[existing].read_text(encoding="utf-8") == "precious\n"
    other = paths["run" if existing == "output" else "output"]
    assert not other.exists()


def test_cli_overwrite_replaces_existing_output(tmp_path, beir_folder, wide_console):
    output, run = tmp_path / "metrics.json", tmp_path / "run.trec"
    output.write_text("precious\n", encoding="utf-8")
    argv = ["bm25", "--data", str(beir_folder), "--quiet", "--output", str(output),
            "--run", str(run)]
    assert cli.main(argv) == 2
    assert output.read_text(encoding="utf-8") == "precious\n"
    assert cli.main([*argv, "--overwrite"]) == 0
    metrics = json.loads(output.read_text(encoding="utf-8"))
    assert {"binary_ndcg@10", "graded_ndcg@10", "mrr@10", "recall@100"} <= set(metrics)
    assert metrics["evaluated"]["split"] == "test"
    lines = run.read_text(encoding="utf-8").splitlines()
    assert lines and all(len(line.split()) == 6 and line.split()[1] == "Q0" for line in lines)
    assert {line.split()[0] for line in lines} <= {"q4", "q5", "q6"}


# --------------------------------------------------------------------------- encoding

@pytest.mark.parametrize("part", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_invalid_utf8_names_file_and_line(beir_folder, part):
    path = beir_folder / part
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1][:3] + b"\xe9" + lines[1][3:]  # a Latin-1 byte on line 2
    path.write_bytes(b"".join(lines))
    err = load_error(beir_folder)
    check(err, path, 2)
