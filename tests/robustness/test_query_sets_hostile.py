"""Hostile inputs of the post-training analyses: query-set files (``tapt bm25/eval --queries
NAME=FILE``, read as queries.jsonl is, every id judged in the split) and the stored ranking
``tapt cases`` reads back from a result file (``--save-run``)."""

from __future__ import annotations

import json

import pytest

from robustness.cases import line_expectations
from robustness.conftest import QRELS, jsonl_lines, write_dataset
from robustness.hostile import VALID, line_variants

LIMIT_PAD = 5000  # > the 4 KiB limit of the line_limit fixture

TEST_QUERIES = [{"_id": query_id, "text": f"rewritten query {number}"}
                for number, query_id in enumerate(sorted({q for q, _, _ in QRELS["test"]}), 1)]
VARIANTS = line_variants(jsonl_lines(TEST_QUERIES), limit_pad=LIMIT_PAD)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_query_set_file_framing_and_encoding(variant, tmp_path, reliability_case, quiet_cli,
                                             capsys, line_limit):
    from tapt.data.beir import load_beir_folder
    from tapt.data.query_sets import read_query_set

    folder = write_dataset(tmp_path / "data")
    path = tmp_path / "rewritten.jsonl"
    path.write_bytes(VARIANTS[variant])
    expected, line, field = line_expectations("ids", len(TEST_QUERIES))[variant]
    case = reliability_case("query set (--queries)", variant, expected=expected)
    dataset = load_beir_folder(folder, ["test"])
    api = case.api(read_query_set, path, dataset.split("test"), dataset.split_file("test"),
                   via="API read_query_set")
    output = tmp_path / "out" / "result.json"
    cli = case.cli(["bm25", "--data", str(folder), "--queries", f"v2={path}",
                    "--output", str(output)], capsys, watch=[tmp_path],
                   must_not_exist=[output])
    if expected == "accepted":
        api.assert_accepted()
        cli.assert_accepted()
    else:
        api.assert_refused(path, line, field)
        cli.assert_refused(path, line, field)


@pytest.mark.parametrize("hostile, record, line", [
    ("an id judged in another split (train)", {"_id": "q1", "text": "x"}, 2),
    ("an id no qrels holds", {"_id": "q99", "text": "x"}, 2),
    ("an integer id not judged in the split", {"_id": 7, "text": "x"}, 2),
])
def test_query_set_ids_must_be_judged_in_the_split(hostile, record, line, tmp_path,
                                                   reliability_case, quiet_cli, capsys):
    folder = write_dataset(tmp_path / "data")
    path = tmp_path / "rewritten.jsonl"
    path.write_bytes(b"\n".join(jsonl_lines([TEST_QUERIES[0], record])) + b"\n")
    case = reliability_case("query set (--queries)", hostile)
    output = tmp_path / "out" / "result.json"
    case.cli(["bm25", "--data", str(folder), "--queries", f"v2={path}",
              "--output", str(output)], capsys, watch=[tmp_path],
             must_not_exist=[output]).assert_refused(path, line, "_id")


def test_a_query_set_too_small_for_its_paired_test_is_refused_before_encoding(
        tmp_path, reliability_case, quiet_cli, capsys):
    """One query (or queries without a relevant passage, as --lenient data can hold) cannot
    be compared with the split's own by a paired test: refused naming the file, before
    the evaluation (it used to fail after it)."""
    folder = write_dataset(tmp_path / "data")
    path = tmp_path / "one.jsonl"
    path.write_bytes(b"\n".join(jsonl_lines(TEST_QUERIES[:1])) + b"\n")
    case = reliability_case("query set (--queries)", "a set of one query")
    output = tmp_path / "out" / "result.json"
    case.cli(["bm25", "--data", str(folder), "--queries", f"v2={path}",
              "--output", str(output)], capsys, watch=[tmp_path],
             must_not_exist=[output]).assert_refused(
        path, contains="1 with a relevant passage")


RANKING_CASES = {
    "no ranking section (written without --save-run)": None,
    "ranking is a list": [],
    "depth 0": {"depth": 0, "queries": {"q4": []}},
    "depth true": {"depth": True, "queries": {"q4": []}},
    "more pairs than the depth": {"depth": 1, "queries": {"q4": [["d1", 0.9], ["d2", 0.8]]}},
    "a pair of three": {"depth": 5, "queries": {"q4": [["d1", 0.9, 1]]}},
    "a NaN score": {"depth": 5, "queries": {"q4": [["d1", float("nan")]]}},
    "a string score": {"depth": 5, "queries": {"q4": [["d1", "0.9"]]}},
    "a passage twice": {"depth": 5, "queries": {"q4": [["d1", 0.9], ["d1", 0.8]]}},
    "not in ranked order": {"depth": 5, "queries": {"q4": [["d1", 0.1], ["d2", 0.8]]}},
    "a passage the data does not hold": {"depth": 5, "queries": {"q4": [["zz", 0.9]]}},
}


@pytest.mark.parametrize("hostile", list(RANKING_CASES))
def test_cases_checks_the_stored_ranking(hostile, tmp_path, reliability_case, quiet_cli,
                                         capsys):
    folder = write_dataset(tmp_path / "data")
    good = tmp_path / "good.json"
    assert quiet_cli  # the fixture sets the console up
    from tapt.cli import main

    assert main(["bm25", "--data", str(folder), "--save-run", "3", "--output",
                 str(good)]) == 0
    data = json.loads(good.read_text())
    if RANKING_CASES[hostile] is None:
        data.pop("ranking")
    else:
        data["ranking"] = RANKING_CASES[hostile]
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    case = reliability_case("result file (tapt cases)", hostile)
    output = tmp_path / "out" / "cases.md"
    case.cli(["cases", f"good={good}", f"bad={path}", "--data", str(folder),
              "--output", str(output)], capsys, watch=[tmp_path],
             must_not_exist=[output]).assert_refused(path)


def test_valid_ranking_is_accepted(tmp_path, reliability_case, quiet_cli, capsys):
    folder = write_dataset(tmp_path / "data")
    from tapt.cli import main

    good = tmp_path / "good.json"
    assert main(["bm25", "--data", str(folder), "--save-run", "3", "--output",
                 str(good)]) == 0
    case = reliability_case("result file (tapt cases)", VALID, expected="accepted")
    case.cli(["cases", str(good), "--data", str(folder), "--output",
              str(tmp_path / "cases.md")], capsys).assert_accepted()
