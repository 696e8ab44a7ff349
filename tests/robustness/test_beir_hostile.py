"""Hostile BEIR inputs (corpus.jsonl, queries.jsonl, qrels/*.tsv) through ``tapt.load_data``
and through ``tapt data validate`` / ``tapt bm25``: every case is accepted when valid or
refused with tapt's own error naming the file, the line and the field; never a library
traceback, never a hang, never a partial output."""

from __future__ import annotations

import json
import os

import pytest

import tapt
from robustness.cases import line_expectations
from robustness.conftest import CORPUS, QUERIES, jsonl_lines, qrels_lines, write_dataset
from robustness.hostile import VALID, deep_json, huge_int, line_variants

LIMIT_PAD = 5000  # > the 4 KiB limit of the line_limit fixture

FILES = {"corpus": ("corpus.jsonl", "ids"), "queries": ("queries.jsonl", "ids"),
         "test": ("qrels/test.tsv", "qrels")}


def original_lines(part: str) -> list[bytes]:
    return {"corpus": lambda: jsonl_lines(CORPUS), "queries": lambda: jsonl_lines(QUERIES),
            "test": lambda: qrels_lines("test")}[part]()


VARIANT_NAMES = list(line_variants(original_lines("corpus"), limit_pad=LIMIT_PAD))


@pytest.mark.parametrize("variant", VARIANT_NAMES)
@pytest.mark.parametrize("part", list(FILES))
def test_line_framing_and_encoding(part, variant, tmp_path, reliability_case, quiet_cli,
                                   capsys, line_limit):
    name, kind = FILES[part]
    lines = original_lines(part)
    data = line_variants(lines, limit_pad=LIMIT_PAD)[variant]
    folder = write_dataset(tmp_path / "data", **{part: data})
    path = folder / name
    expected, line, field = line_expectations(kind, len(lines))[variant]
    case = reliability_case(name, variant, expected=expected)
    api = case.api(tapt.load_data, folder, via="API tapt.load_data")
    cli = case.cli(["data", "validate", str(folder)], capsys)
    if expected == "accepted":
        api.assert_accepted()
        cli.assert_accepted()
    else:
        api.assert_refused(path, line, field)
        cli.assert_refused(path, line, field)


@pytest.mark.parametrize("variant", [VALID, "UTF-8 BOM and CRLF line ends", "UTF-16 LE with BOM",
                                     "truncated inside the last line", "NUL byte on line 2"])
@pytest.mark.parametrize("part", ["corpus", "test"])
def test_commands_write_nothing_on_bad_input(part, variant, tmp_path, reliability_case,
                                             quiet_cli, capsys):
    """``tapt bm25 / mine / eval --output``: a refused input leaves no file behind; an
    accepted one is written whole (bm25)."""
    name, kind = FILES[part]
    lines = original_lines(part)
    folder = write_dataset(tmp_path / "data", **{part: line_variants(lines)[variant]})
    expected, line, field = line_expectations(kind, len(lines))[variant]
    out = tmp_path / "out"
    outputs = [out / "metrics.json", out / "run.trec"]
    case = reliability_case(name, variant, expected=expected)
    outcome = case.cli(["bm25", "--data", str(folder), "--split", "test", "--quiet",
                        "--output", str(outputs[0]), "--run", str(outputs[1])], capsys,
                       watch=[tmp_path], must_not_exist=outputs)
    if expected == "accepted":
        outcome.assert_accepted()
        assert all(path.is_file() for path in outputs)
        return
    outcome.assert_refused(folder / name, line, field)
    assert not out.exists()
    # The other commands that read a BEIR folder and write files (no model is loaded:
    # the data is refused first).
    mined = out / "mined.jsonl"
    case.cli(["mine", "--data", str(folder), "--split", "test", "--retriever", "bm25",
              "--output", str(mined), "--quiet"], capsys, watch=[tmp_path],
             must_not_exist=[mined]).assert_refused(folder / name, line, field)
    case.cli(["eval", "--model", "sentence-transformers/all-MiniLM-L6-v2", "--data",
              str(folder), "--split", "test", "--quiet", "--output", str(outputs[0]), "--run",
              str(outputs[1])], capsys, watch=[tmp_path],
             must_not_exist=outputs).assert_refused(folder / name, line, field)


# --------------------------------------------------------------------------- JSONL fields

def raw(text: str) -> str:
    return text


# (case name, line 6 of corpus.jsonl, expected, field). Line 6 (d6) is judged nowhere, so
# an accepted record there does not disturb the qrels.
CORPUS_FIELDS = [
    ("_id with a tab", {"_id": "d\t6", "text": "x"}, "refused", "_id"),
    ("_id with a newline (\\n escape)", {"_id": "d\n6", "text": "x"}, "refused", "_id"),
    ("_id with a carriage return", {"_id": "d6\r", "text": "x"}, "refused", "_id"),
    ("_id with a NUL (\\u0000 escape)", {"_id": "d\u00006", "text": "x"}, "refused", "_id"),
    ("_id with a lone surrogate (\\ud800)", raw('{"_id": "d\\ud800", "text": "x"}'),
     "refused", "_id"),
    ("text with a lone surrogate (\\udfff)", raw('{"_id": "d6", "text": "x\\udfff"}'),
     "refused", "text"),
    ("_id NaN", raw('{"_id": NaN, "text": "x"}'), "refused", "_id"),
    ("_id Infinity", raw('{"_id": Infinity, "text": "x"}'), "refused", "_id"),
    ("text -Infinity", raw('{"_id": "d6", "text": -Infinity}'), "refused", "text"),
    ("_id a float (6.5)", {"_id": 6.5, "text": "x"}, "refused", "_id"),
    ("_id a boolean", {"_id": True, "text": "x"}, "refused", "_id"),
    ("_id an integer (kept as the string '6')", {"_id": 6, "text": "x"}, "accepted", None),
    ("_id a 5,000-digit integer", raw('{"_id": ' + huge_int().decode() + ', "text": "x"}'),
     "refused", None),
    ("a value nested 100,000 deep", raw('{"_id": "d6", "text": ' + deep_json().decode() + "}"),
     "refused", None),
    ("text is a list", {"_id": "d6", "text": ["a", "b"]}, "refused", "text"),
    ("title is an object", {"_id": "d6", "title": {"a": 1}, "text": "x"}, "refused", "title"),
    ("text missing", {"_id": "d6", "title": "t"}, "refused", "text"),
    ("text empty", {"_id": "d6", "text": ""}, "refused", "text"),
    ("text only ideographic spaces (U+3000)", {"_id": "d6", "text": "\u3000\u3000"},
     "refused", "text"),
    ("duplicate key in one object (the last wins, as in every JSON parser)",
     raw('{"_id": "dX", "_id": "d6", "text": "x"}'), "accepted", None),
    ("record is a JSON array", raw('["d6", "x"]'), "refused", None),
    ("record is a JSON string", raw('"d6"'), "refused", None),
    ("record is JSON null", raw("null"), "refused", None),
    ("unicode everywhere (emoji, RTL, combining marks)",
     {"_id": "d6-é", "title": "🧪 عنوان", "text": "e\u0301poxy \u202etext"}, "accepted", None),
    ("a 1 MB passage (under the line limit)", {"_id": "d6", "text": "binder " * 150_000},
     "accepted", None),
]


@pytest.mark.parametrize("name,record,expected,field", CORPUS_FIELDS,
                         ids=[c[0] for c in CORPUS_FIELDS])
def test_corpus_fields(name, record, expected, field, tmp_path, reliability_case, quiet_cli,
                       capsys):
    records = list(CORPUS[:5]) + [record]
    folder = write_dataset(tmp_path / "data", corpus=b"\n".join(jsonl_lines(records)) + b"\n")
    case = reliability_case("corpus.jsonl", name, expected=expected)
    api = case.api(tapt.load_data, folder, via="API tapt.load_data")
    cli = case.cli(["data", "validate", str(folder)], capsys)
    for outcome in (api, cli):
        if expected == "accepted":
            outcome.assert_accepted()
        else:
            outcome.assert_refused(folder / "corpus.jsonl", 6, field)


QUERY_FIELDS = [
    ("_id with a tab", {"_id": "q\t6", "text": "x"}, "refused", "_id"),
    ("text NaN", raw('{"_id": "q6", "text": NaN}'), "refused", "text"),
    ("text with a lone surrogate (\\ud83d)", raw('{"_id": "q6", "text": "\\ud83d?"}'),
     "refused", "text"),
    ("duplicate _id (q5 again)", {"_id": "q5", "text": "again"}, "refused", "_id"),
    ("_id missing", {"text": "x"}, "refused", "_id"),
]


@pytest.mark.parametrize("name,record,expected,field", QUERY_FIELDS,
                         ids=[c[0] for c in QUERY_FIELDS])
def test_query_fields(name, record, expected, field, tmp_path, reliability_case, quiet_cli,
                      capsys):
    records = list(QUERIES[:5]) + [record]
    folder = write_dataset(tmp_path / "data", queries=b"\n".join(jsonl_lines(records)) + b"\n")
    case = reliability_case("queries.jsonl", name, expected=expected)
    for outcome in (case.api(tapt.load_data, folder, via="API tapt.load_data"),
                    case.cli(["data", "validate", str(folder)], capsys)):
        outcome.assert_refused(folder / "queries.jsonl", 6, field)


# --------------------------------------------------------------------------- TSV rows

# (case name, line 3 of qrels/test.tsv (originally q4 d2 2), expected, field)
QRELS_ROWS = [
    ("score NaN", "q4\td2\tnan", "refused", "score"),
    ("score inf", "q4\td2\tinf", "refused", "score"),
    ("score -inf", "q4\td2\t-inf", "refused", "score"),
    ("score a float (1.5)", "q4\td2\t1.5", "refused", "score"),
    ("score a float-looking integer (2.0)", "q4\td2\t2.0", "refused", "score"),
    ("score empty", "q4\td2\t", "refused", "score"),
    ("score a word", "q4\td2\tthree", "refused", "score"),
    ("score 2**31 (trec_eval allocates per grade level)", "q4\td2\t2147483648", "refused",
     "score"),
    ("score 10**30", "q4\td2\t" + "1" + "0" * 30, "refused", "score"),
    ("score -1 (TREC: judged non-relevant)", "q4\td2\t-1", "accepted", None),
    ("score 0", "q4\td2\t0", "accepted", None),
    ("cells padded with spaces", " q4 \t d2 \t 2 ", "accepted", None),
    ("CSV-style quoted id (\"q4\", unquoted as BEIR's loader does)", '"q4"\td2\t2',
     "accepted", None),
    ("trailing tab (4 fields)", "q4\td2\t2\t", "refused", None),
    ("space-separated row", "q4 d2 2", "refused", None),
    ("TREC 4-column row (q4 0 d2 2)", "q4\t0\td2\t2", "refused", None),
    ("stray double quote opening an id", '"q4\td2\t2', "refused", None),
    ("unknown corpus id", "q4\td99\t2", "refused", "corpus-id"),
    ("unknown query id", "q99\td2\t2", "refused", "query-id"),
    ("empty query id", "\td2\t2", "refused", "query-id"),
    ("query id with a NUL byte", "q4\x00\td2\t2", "refused", None),
    ("duplicate header on line 3", "query-id\tcorpus-id\tscore", "refused", "score"),
    ("id over csv's 128 KiB field limit", "q" * 200_000 + "\td2\t2", "refused", None),
]


@pytest.mark.parametrize("name,row,expected,field", QRELS_ROWS, ids=[c[0] for c in QRELS_ROWS])
def test_qrels_rows(name, row, expected, field, tmp_path, reliability_case, quiet_cli, capsys):
    lines = qrels_lines("test")
    lines[2] = row.encode("utf-8")
    folder = write_dataset(tmp_path / "data", test=b"\n".join(lines) + b"\n")
    case = reliability_case("qrels/test.tsv", name, expected=expected)
    for outcome in (case.api(tapt.load_data, folder, via="API tapt.load_data"),
                    case.cli(["data", "validate", str(folder)], capsys)):
        if expected == "accepted":
            outcome.assert_accepted()
        else:
            outcome.assert_refused(folder / "qrels" / "test.tsv", 3, field)


QRELS_HEADERS = [
    ("header missing (first row is data)", None, "refused", 1),
    ("header columns swapped", b"corpus-id\tquery-id\tscore", "refused", 1),
    ("header in upper case", b"QUERY-ID\tCORPUS-ID\tSCORE", "refused", 1),
    ("header separated by spaces", b"query-id corpus-id score", "refused", 1),
    ("header with a fourth column", b"query-id\tcorpus-id\tscore\titeration", "refused", 1),
    ("header only, no rows", "header-only", "refused", None),
]


@pytest.mark.parametrize("name,header,expected,line", QRELS_HEADERS,
                         ids=[c[0] for c in QRELS_HEADERS])
def test_qrels_headers(name, header, expected, line, tmp_path, reliability_case, quiet_cli,
                       capsys):
    lines = qrels_lines("test")
    if header is None:
        lines = lines[1:]
    elif header == "header-only":
        lines = lines[:1]
    else:
        lines[0] = header
    folder = write_dataset(tmp_path / "data", test=b"\n".join(lines) + b"\n")
    case = reliability_case("qrels/test.tsv", name, expected=expected)
    for outcome in (case.api(tapt.load_data, folder, via="API tapt.load_data"),
                    case.cli(["data", "validate", str(folder)], capsys)):
        outcome.assert_refused(folder / "qrels" / "test.tsv", line)


# --------------------------------------------------------------------------- the filesystem

def _empty_folder(data):
    for path in sorted(data.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    return data / "corpus.jsonl"


def _regular_file(data):
    target = data.parent / "not-a-folder.jsonl"
    target.write_text("{}\n")
    return target


def _folder_loop(data):
    loop = data.parent / "loop"
    os.symlink(loop, loop)
    return loop


def _corpus_loop(data):
    (data / "corpus.jsonl").unlink()
    os.symlink(data / "corpus.jsonl", data / "corpus.jsonl")
    return data / "corpus.jsonl"


def _corpus_dangling(data):
    (data / "corpus.jsonl").unlink()
    os.symlink(data / "gone.jsonl", data / "corpus.jsonl")
    return data / "corpus.jsonl"


def _corpus_folder(data):
    (data / "corpus.jsonl").unlink()
    (data / "corpus.jsonl").mkdir()
    return data / "corpus.jsonl"


def _corpus_fifo(data):
    (data / "corpus.jsonl").unlink()
    os.mkfifo(data / "corpus.jsonl")
    return data / "corpus.jsonl"


def _corpus_dev_zero(data):
    (data / "corpus.jsonl").unlink()
    os.symlink("/dev/zero", data / "corpus.jsonl")
    return data / "corpus.jsonl"


def _qrels_missing(data):
    for path in (data / "qrels").iterdir():
        path.unlink()
    (data / "qrels").rmdir()
    return data / "qrels" / "train.tsv"


def _qrels_folder(data):
    (data / "qrels" / "test.tsv").unlink()
    (data / "qrels" / "test.tsv").mkdir()
    return data / "qrels" / "test.tsv"


FILESYSTEM = [
    ("empty folder", _empty_folder),
    ("--data is a regular file", _regular_file),
    ("--data is a symlink loop", _folder_loop),
    ("corpus.jsonl is a symlink loop", _corpus_loop),
    ("corpus.jsonl is a dangling symlink", _corpus_dangling),
    ("corpus.jsonl is a folder", _corpus_folder),
    ("corpus.jsonl is a FIFO (named pipe, nobody writing)", _corpus_fifo),
    ("corpus.jsonl is a symlink to /dev/zero", _corpus_dev_zero),
    ("qrels/ missing", _qrels_missing),
    ("qrels/test.tsv is a folder", _qrels_folder),
]


@pytest.mark.parametrize("name,make", FILESYSTEM, ids=[c[0] for c in FILESYSTEM])
def test_filesystem(name, make, dataset_dir, reliability_case, quiet_cli, capsys):
    if make is _corpus_dev_zero and not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    named = make(dataset_dir)
    source = dataset_dir if make not in (_regular_file, _folder_loop) else named
    case = reliability_case("BEIR folder", name)
    for outcome in (case.api(tapt.load_data, source, timeout=10, via="API tapt.load_data"),
                    case.cli(["data", "validate", str(source)], capsys, timeout=10)):
        outcome.assert_refused(named)


def test_lenient_accepts_what_public_beir_sets_have(tmp_path, reliability_case, quiet_cli,
                                                    capsys):
    """``--lenient``: an empty passage and a query without an anchor load."""
    corpus = list(CORPUS[:5]) + [{"_id": "d6", "text": ""}]
    lines = qrels_lines("test")
    lines[3] = b"q5\td3\t2"  # q5 loses its anchor
    folder = write_dataset(tmp_path / "data", corpus=b"\n".join(jsonl_lines(corpus)) + b"\n",
                           test=b"\n".join(lines) + b"\n")
    case = reliability_case("BEIR folder", "empty passage and query without an anchor, "
                            "with --lenient", expected="accepted")
    case.api(tapt.load_data, folder, require_anchor=False, allow_empty=True,
             via="API tapt.load_data").assert_accepted()
    case.cli(["data", "validate", str(folder), "--lenient"], capsys).assert_accepted()
    strict = reliability_case("BEIR folder", "empty passage, without --lenient")
    strict.cli(["data", "validate", str(folder)], capsys).assert_refused(
        folder / "corpus.jsonl", 6, "text")


def test_write_then_read_round_trip(tmp_path, reliability_case):
    """What tapt writes (write_beir) it reads back, unicode and odd-but-valid ids included;
    an id with a space (tapt.util.ids' rule: no whitespace) is refused before anything is
    written."""
    from tapt.data.beir import DataError, Passage, write_beir

    corpus = {'d"1': Passage("quote in id"), "d|2": Passage("bar in id"),
              "d-é": Passage("accent", title="é")}
    queries = {"q'1": "which?"}
    folder = write_beir(tmp_path / "rt", corpus, queries,
                        {"test": {"q'1": {'d"1': 3, "d|2": 2, "d-é": 1}}})
    case = reliability_case("BEIR folder", "round trip of write_beir with quotes, bars "
                            "and accents in ids", expected="accepted")
    outcome = case.api(tapt.load_data, folder, splits=["test"], via="API tapt.load_data")
    outcome.assert_accepted()
    loaded = tapt.load_data(folder, splits=["test"])
    assert set(loaded.corpus) == set(corpus)
    assert loaded.qrels["test"] == {"q'1": {'d"1': 3, "d|2": 2, "d-é": 1}}
    assert json.loads((folder / "corpus.jsonl").read_text().splitlines()[0])["_id"] == 'd"1'
    with pytest.raises(DataError, match="corpus id 'd 2'"):
        write_beir(tmp_path / "space", {"d 2": Passage("space in id")}, queries, {})
    assert not (tmp_path / "space" / "corpus.jsonl").exists()
