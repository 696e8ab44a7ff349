"""Property-based hostile inputs (hypothesis): whatever bytes, records, rows, recipes,
overrides or result files are generated, each reader either accepts them or raises tapt's
own error naming the file (and a line inside it); never a library exception, never a hang
(every example runs under a timeout). Each property is one row of docs/reliability.md with
the number of generated inputs accepted and refused."""

from __future__ import annotations

import json

import pytest
import yaml

from robustness.conftest import CORPUS, jsonl_lines, write_dataset

pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tapt
from tapt.data.beir import DataError, read_corpus, read_qrels, read_queries
from tapt.data.mined import read_mined
from tapt.data.passages import read_passage_file
from tapt.recipe import load_recipe

EXAMPLES = 120
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Pieces that break readers: encodings, line ends, quotes, NUL, surrogates, huge numbers.
NASTY_BYTES = [b"\xef\xbb\xbf", b"\xff\xfe", b"\r\n", b"\r", b"\n", b"\t", b"\x00", b'"',
               b"\\", b"\xc3", b"\xe9", b"\xed\xa0\x80", b"NaN", b"Infinity", b"-", b"1e999",
               b"9" * 5000, b"[" * 3000, b"{", b"}", b",", b":", b"null", b"\xf0\x9f\xa7\xaa"]
JSON_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
                | st.text(max_size=12) | st.sampled_from(["d1", "q1", "", "\t", "\u0000",
                                                          "\ud800", "é", " d1 "]))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                           max_leaves=12)


def nasty_bytes() -> st.SearchStrategy[bytes]:
    return st.lists(st.sampled_from(NASTY_BYTES) | st.binary(max_size=20), max_size=30).map(
        b"".join)


def check_names_file(error: Exception, path, data: bytes) -> None:
    """A refusal names the file, and a line that exists (when it names one)."""
    if isinstance(error, DataError):
        assert error.path == str(path)
        if error.line is not None:
            assert 1 <= error.line <= max(1, data.count(b"\n") + 1), (error.line, data[:200])
    else:
        assert str(path) in str(error) or "override" in str(error)


def run_sample(case, path, data: bytes, reader, *args) -> None:
    path.write_bytes(data)
    kind = case.sample(reader, path, *args)
    if kind == "refused":
        try:
            reader(path, *args)
        except (DataError, ValueError) as err:
            check_names_file(err, path, data)


def json_line(value) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")


RECORD = st.fixed_dictionaries(
    {"_id": st.sampled_from(["d1", "d2", "d\t3", 4, None, "\ud800", "d1 "]) | JSON_VALUES,
     "text": st.sampled_from(["a passage", "", " ", "x\ud800"]) | JSON_VALUES},
    optional={"title": JSON_VALUES})
LINE = (RECORD.map(json_line) | RECORD.map(lambda r: json.dumps(r).encode())  # \\u escapes
        | JSON_VALUES.map(json_line) | nasty_bytes()
        | st.sampled_from(jsonl_lines(CORPUS)))
SEPARATOR = st.sampled_from([b"\n", b"\r\n", b"\r", b"\n\n"])


@st.composite
def jsonl_files(draw) -> bytes:
    lines = draw(st.lists(LINE, max_size=8))
    sep = draw(SEPARATOR)
    prefix = draw(st.sampled_from([b"", b"\xef\xbb\xbf", b"\xff\xfe"]))
    data = prefix + sep.join(lines) + draw(st.sampled_from([b"", sep]))
    cut = draw(st.none() | st.integers(0, max(0, len(data))))
    return data if cut is None else data[:cut]


@pytest.mark.parametrize("reader", [read_corpus, read_queries], ids=["corpus", "queries"])
def test_jsonl_records(reader, tmp_path, reliability_case):
    case = reliability_case(f"{reader.__name__.removeprefix('read_')}.jsonl",
                            "generated JSONL: records with odd values, nasty bytes, BOMs, "
                            "CR/CRLF line ends, truncation", expected="either")

    @SETTINGS
    @given(jsonl_files())
    def prop(data):
        run_sample(case, tmp_path / "file.jsonl", data, reader)

    prop()
    assert case.counts.get("refused") and case.counts.get("accepted")


def test_random_bytes_every_reader(tmp_path, reliability_case):
    """Raw random bytes into every line-based reader."""
    dataset = tapt.load_data(write_dataset(tmp_path / "data"))
    readers = [("corpus", read_corpus, ()), ("qrels", read_qrels, ()),
               ("mined", read_mined, (dataset, "train")),
               ("txt", read_passage_file, ()), ("jsonl", read_passage_file, ())]
    case = reliability_case("every line-based reader", "generated raw bytes", expected="either")

    @SETTINGS
    @given(st.binary(max_size=400) | nasty_bytes(), st.sampled_from(readers))
    def prop(data, reader):
        name, function, args = reader
        suffix = ".txt" if name == "txt" else ".jsonl" if name != "qrels" else ".tsv"
        run_sample(case, tmp_path / f"file{suffix}", data, function, *args)

    prop()


CELL = (st.sampled_from(["q1", "q2", "d1", "d2", "3", "2", "1", "0", "-1", "nan", "inf",
                         "1.5", "", " ", '"', '"q1"', "q1\x00", "2147483648", "1_0", "é",
                         "query-id", "score"])
        | st.text(alphabet=st.characters(codec="utf-8"), max_size=6))


@st.composite
def qrels_files(draw) -> bytes:
    valid = "query-id\tcorpus-id\tscore"
    header = draw(st.sampled_from([valid, valid, valid, "query-id\tcorpus-id", "",
                                   "\ufeffquery-id\tcorpus-id\tscore", "q1\td1\t3"]))
    good_rows = st.sampled_from(["q1\td1\t3", "q2\td2\t3", "q1\td2\t1", "q2\td1\t0",
                                 " q1 \t d2 \t -1 ", "", "q2\td1\t2"])
    odd_rows = st.lists(CELL, min_size=0, max_size=4).map("\t".join)
    rows = draw(st.lists(good_rows | good_rows | odd_rows, max_size=8))
    sep = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    data = sep.join([header, *rows]).encode("utf-8", "surrogatepass") + sep.encode()
    cut = draw(st.none() | st.none() | st.integers(0, len(data)))
    return data if cut is None else data[:cut]


def test_qrels_rows(tmp_path, reliability_case):
    case = reliability_case("qrels (TSV)", "generated TSV: headers, cells with tabs, quotes, "
                            "NUL, odd scores, CR/CRLF, truncation", expected="either")

    @SETTINGS
    @given(qrels_files(), st.booleans())
    def prop(data, with_ids):
        ids = ({"d1", "d2"}, {"q1", "q2"}) if with_ids else (None, None)
        run_sample(case, tmp_path / "test.tsv", data, read_qrels, *ids)

    prop()
    assert case.counts.get("refused") and case.counts.get("accepted")


NEGATIVE = st.fixed_dictionaries(
    {"id": st.sampled_from(["d1", "d2", "d4", "d6", "d99", ""]) | JSON_VALUES},
    optional={"rank": JSON_VALUES | st.integers(min_value=10**300, max_value=10**400),
              "score": st.floats(allow_nan=True, allow_infinity=True) | JSON_VALUES})
MINED_RECORD = st.fixed_dictionaries(
    {"query_id": st.sampled_from(["q1", "q2", "q4", "q99"]) | JSON_VALUES,
     "negatives": st.lists(NEGATIVE, max_size=4) | JSON_VALUES})


def test_mined_records(tmp_path, reliability_case):
    dataset = tapt.load_data(write_dataset(tmp_path / "data"))
    case = reliability_case("mined negatives (JSONL)", "generated records: odd ids, ranks, "
                            "scores (NaN, inf, 400-digit integers)", expected="either")

    @SETTINGS
    @given(st.lists(MINED_RECORD.map(json_line) | nasty_bytes(), max_size=5), SEPARATOR)
    def prop(lines, sep):
        run_sample(case, tmp_path / "mined.jsonl", sep.join(lines) + sep, read_mined, dataset,
                   "train")

    prop()


VALID_RECIPE = {"model": {"name": "m"}, "data": {"path": "d"}, "output_dir": "o"}
RECIPE_VALUES = st.recursive(
    JSON_SCALARS | st.sampled_from([float("inf"), float("nan"), -1, 0, "1e999", ".inf"]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["name", "epochs", "learning_rate", "lora", "x"]), inner,
                      max_size=3), max_leaves=8)


@st.composite
def recipes(draw) -> bytes:
    data = json.loads(json.dumps(VALID_RECIPE))
    for _ in range(draw(st.integers(0, 4))):
        section = draw(st.sampled_from(["model", "data", "training", "loss", "eval", "lora",
                                        "objective", "hub"]))
        node = data.setdefault(section, {}) if isinstance(data.get(section, {}), dict) else {}
        node[draw(st.sampled_from(["name", "epochs", "learning_rate", "path",
                                   "per_device_batch_size", "target_modules", "repo_id"]))] = \
            draw(RECIPE_VALUES)
    try:
        text = yaml.safe_dump(data, allow_unicode=True).encode("utf-8", "surrogatepass")
    except yaml.YAMLError:
        text = b"model: {name: m}\n"
    if draw(st.booleans()):
        text = draw(nasty_bytes()) + text
    cut = draw(st.none() | st.integers(0, len(text)))
    return text if cut is None else text[:cut]


def test_recipes(tmp_path, reliability_case):
    case = reliability_case("recipe (YAML)", "generated recipes: odd values (inf, NaN, "
                            "nested lists), nasty bytes, truncation", expected="either")

    @SETTINGS
    @given(recipes())
    def prop(data):
        run_sample(case, tmp_path / "recipe.yaml", data, load_recipe)

    prop()
    assert case.counts.get("refused") and case.counts.get("accepted")


OVERRIDE = st.builds(
    lambda key, sep, value: key + sep + value,
    st.sampled_from(["training.epochs", "training.learning_rate", "model.name", "x", "",
                     "training..epochs", "model.lora.r", "data.path.x", "training.epochs.y"])
    | st.text(max_size=15),
    st.sampled_from(["=", "", "=="]),
    st.sampled_from(["1", "inf", ".nan", "[", "{a: [", "\x00", "1e999", "!!python/none",
                     "&a [*a]", "-1", "''", "null"]) | st.text(max_size=15))


def test_overrides(tmp_path, reliability_case):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(VALID_RECIPE), encoding="utf-8")
    case = reliability_case("recipe override (key=value)", "generated overrides",
                            expected="either")

    @SETTINGS
    @given(st.lists(OVERRIDE, min_size=1, max_size=3))
    def prop(overrides):
        case.sample(load_recipe, path, overrides)

    prop()
    assert case.counts.get("refused") and case.counts.get("accepted")


METRIC = (st.floats(allow_nan=True, allow_infinity=True) | st.integers(-2, 2) | JSON_VALUES)


def test_result_files(tmp_path, reliability_case):
    from tapt.analysis.compare import compare_results

    case = reliability_case("result file (tapt compare)", "generated result files: odd "
                            "metric values, timings, evaluated blocks", expected="either")
    keys = ["binary_ndcg@10", "graded_ndcg@10", "mrr@10", "recall@100"]

    @SETTINGS
    @given(st.fixed_dictionaries({k: METRIC for k in keys},
                                 optional={"timings": JSON_VALUES,
                                           "evaluated": st.fixed_dictionaries(
                                               {}, optional={"model": JSON_VALUES,
                                                             "data": JSON_VALUES,
                                                             "config": JSON_VALUES})
                                           | JSON_VALUES}),
           st.sampled_from([b"", b"\xef\xbb\xbf"]))
    def prop(result, prefix):
        path = tmp_path / "result.json"
        path.write_bytes(prefix + json_line(result))
        case.sample(compare_results, [str(path)])

    prop()


def test_accepted_framing_is_lossless(tmp_path, reliability_case):
    """A UTF-8 BOM and CRLF line ends change nothing in what is read."""
    case = reliability_case("corpus.jsonl", "generated valid corpora read with and without "
                            "BOM + CRLF framing: identical passages", expected="accepted")
    text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]),
                   min_size=1, max_size=20).filter(str.strip)

    @SETTINGS
    @given(st.dictionaries(st.from_regex(r"[a-z0-9_-]{1,8}", fullmatch=True), text,
                           min_size=1, max_size=6))
    def prop(passages):
        lines = [json_line({"_id": k, "text": v}) for k, v in passages.items()]
        plain, framed = tmp_path / "plain.jsonl", tmp_path / "framed.jsonl"
        plain.write_bytes(b"\n".join(lines) + b"\n")
        framed.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\r\n")
        assert case.sample(read_corpus, framed) == "accepted"
        assert read_corpus(framed) == read_corpus(plain)
        assert {k: p.text for k, p in read_corpus(framed).items()} == passages

    prop()
