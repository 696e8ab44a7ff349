"""Data rules: split leakage against qrels files that are not
loaded, ids that break TREC run files, and public BEIR qrels that mark relevant passages
with grade 1 (the relevance rule)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

import tapt
from robustness.conftest import CORPUS, QUERIES, jsonl_lines, qrels_lines, write_dataset
from tapt.data.beir import DataError
from tapt.data.relevance import BEIR, FORMBENCH, choose_rule

AREA = "data rules"


def regraded(source: Path, target: Path, grades: dict[int, int]) -> Path:
    """A copy of ``source`` with every qrels grade mapped through ``grades``."""
    shutil.copytree(source, target)
    for path in (target / "qrels").glob("*.tsv"):
        lines = path.read_text(encoding="utf-8").splitlines()
        rows = [line.rsplit("\t", 1) for line in lines[1:]]
        path.write_text("\n".join([lines[0]] + [f"{head}\t{grades[int(grade)]}"
                                                for head, grade in rows]) + "\n",
                        encoding="utf-8")
    return target


BEIR_01 = {3: 1, 2: 0, 1: 0}
"""FormBench grades -> the usual BEIR form: relevant 1, judged non-relevant 0."""
BEIR_012 = {3: 2, 2: 1, 1: 0}
"""FormBench grades -> TREC-style 0/1/2 (2 relevant, 1 partially relevant)."""


def first_row(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()[1].split("\t")


def leaky_copy(source: Path, target: Path) -> tuple[Path, str]:
    """``source`` with the first train query also judged in test.tsv."""
    shutil.copytree(source, target)
    query_id, doc_id, _ = first_row(target / "qrels" / "train.tsv")
    with (target / "qrels" / "test.tsv").open("a", encoding="utf-8") as handle:
        handle.write(f"{query_id}\t{doc_id}\t3\n")
    return target, query_id


def out_text(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


# --------------------------------------------------------------------------- 5. split leakage

@pytest.mark.reliability(
    area=AREA, reader="qrels (split leakage)",
    fault="a train query also judged in test.tsv; tapt train without --test (test not loaded)",
    behaviour="refused before any model loads, exit 2, naming train.tsv, test.tsv, the count "
              "and the ids")
def test_training_refuses_a_query_also_judged_in_the_unloaded_test_split(
        synth_tiny, tmp_path, make_recipe, quiet_cli, capsys):
    folder, query_id = leaky_copy(synth_tiny, tmp_path / "leaky")
    recipe_file, output = make_recipe("leak", data_path=folder)
    assert quiet_cli.main(["train", str(recipe_file)]) == 2
    message = out_text(capsys)
    assert f"{folder / 'qrels' / 'train.tsv'}:2: field 'query-id':" in message
    assert str(folder / "qrels" / "test.tsv") in message
    assert "1 of 23 queries are also judged" in message and f"'{query_id}'" in message
    assert not (output / "checkpoints").exists() or not any((output / "checkpoints").iterdir())
    with pytest.raises(DataError) as info:  # the library call training makes
        tapt.load_data(folder, splits=["train", "dev"], leaks="error")
    assert (info.value.line, info.value.field) == (2, "query-id")


@pytest.mark.reliability(
    area=AREA, reader="qrels (split leakage)",
    fault="tapt bm25 --split test on a folder whose test query is also judged in train.tsv, "
          "with unparsable lines in the unloaded train.tsv and dev.tsv",
    behaviour="evaluates (exit 0) with a warning naming test.tsv, train.tsv, the count and "
              "the ids; bad lines of unloaded splits are skipped")
def test_evaluation_warns_about_a_query_judged_in_another_split(synth_tiny, tmp_path, quiet_cli,
                                                                capsys, caplog):
    folder, query_id = leaky_copy(synth_tiny, tmp_path / "leaky")
    for split in ("train", "dev"):  # not this run's split: its own validation is not run
        with (folder / "qrels" / f"{split}.tsv").open("ab") as handle:
            handle.write(b"not a row\nq1\td1\tnan\n\xff\xfe\x00garbage\n\"\tx\t1\n")
    caplog.set_level(logging.WARNING, logger="tapt")
    assert quiet_cli.main(["bm25", "--data", str(folder), "--split", "test", "--quiet"]) == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
                and "also judged" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert str(folder / "qrels" / "test.tsv") in warnings[0]
    assert str(folder / "qrels" / "train.tsv") in warnings[0]
    assert "1 of 4 queries" in warnings[0] and f"'{query_id}'" in warnings[0]
    assert "binary_ndcg@10" in out_text(capsys)
    skipped = [r.getMessage() for r in caplog.records if "no train_overlap" in r.getMessage()]
    assert len(skipped) == 1 and "train.tsv" in skipped[0]  # the overlap is what is given up


# --------------------------------------------------------------------------- 6. ids

def with_query_id(folder: Path, query_id: str) -> Path:
    """The tiny robustness dataset with q6 (judged in test) renamed ``query_id``."""
    queries = list(QUERIES[:5]) + [{"_id": query_id, "text": QUERIES[5]["text"]}]
    test = [line.replace(b"q6\t", f"{query_id}\t".encode()) for line in qrels_lines("test")]
    return write_dataset(folder, queries=b"\n".join(jsonl_lines(queries)) + b"\n",
                         test=b"\n".join(test) + b"\n")


BAD_IDS = [("a space (query 0 \u00e9)", "query 0 \u00e9"),
           ("a no-break space (U+00A0)", "q\u00a06"),
           ("an ideographic space (U+3000)", "q\u30006"),
           ("a zero-width space (U+200B)", "q\u200b6"),
           ("a right-to-left mark (U+200F)", "q6\u200f"),
           ("a line separator (U+2028)", "q\u20286")]


@pytest.mark.parametrize("name,value", BAD_IDS, ids=[n for n, _ in BAD_IDS])
@pytest.mark.reliability(
    area=AREA, reader="ids (corpus, queries, qrels, mined)",
    fault="an id with whitespace or an invisible character: query 0 \u00e9, U+00A0, U+3000, "
          "U+200B, U+200F, U+2028 (in queries.jsonl, corpus.jsonl and qrels)",
    behaviour="refused at load with file:line and the field (tapt.util.ids: no Unicode "
              "whitespace Z*/isspace, no control or format character C*)")
def test_ids_with_whitespace_or_invisible_characters_are_refused(name, value, tmp_path,
                                                                  quiet_cli, capsys):
    folder = with_query_id(tmp_path / "queries", value)
    with pytest.raises(DataError) as info:
        tapt.load_data(folder)
    assert (info.value.path, info.value.line, info.value.field) == (
        str(folder / "queries.jsonl"), 6, "_id")
    assert f"U+{ord(next(c for c in value if not c.isalnum())):04X}" in str(info.value)
    assert quiet_cli.main(["data", "validate", str(folder)]) == 2
    assert f"{folder / 'queries.jsonl'}:6: field '_id':" in out_text(capsys)

    corpus = list(CORPUS[:5]) + [{"_id": value.replace("q", "d"), "text": "x"}]
    folder = write_dataset(tmp_path / "corpus", corpus=b"\n".join(jsonl_lines(corpus)) + b"\n")
    with pytest.raises(DataError) as info:
        tapt.load_data(folder)
    assert (info.value.line, info.value.field) == (6, "_id")

    lines = qrels_lines("test")
    lines[2] = f"q4\t{value.replace('q', 'd')}\t2".encode()
    folder = write_dataset(tmp_path / "qrels", test=b"\n".join(lines) + b"\n")
    with pytest.raises(DataError) as info:
        tapt.load_data(folder)
    assert (info.value.path, info.value.line, info.value.field) == (
        str(folder / "qrels" / "test.tsv"), 3, "corpus-id")


@pytest.mark.reliability(
    area=AREA, reader="ids (corpus, queries, qrels, mined)",
    fault="a mined-negatives line whose query_id or negative id holds a space",
    behaviour="refused with file:line and the field (query_id, negatives[i].id)")
def test_mined_negative_ids_follow_the_same_rule(dataset_dir, tmp_path):
    from tapt.data.mined import read_mined

    dataset = tapt.load_data(dataset_dir)
    for record, field in (({"query_id": "q 1", "negatives": []}, "query_id"),
                          ({"query_id": "q1", "negatives": [{"id": "d5"}, {"id": "d\u00a05"}]},
                           "negatives[1].id")):
        path = tmp_path / "mined.jsonl"
        path.write_text(json.dumps({"query_id": "q2", "negatives": [{"id": "d5"}]}) + "\n"
                        + json.dumps(record) + "\n", encoding="utf-8")
        with pytest.raises(DataError) as info:
            read_mined(path, dataset, "train")
        assert (info.value.line, info.value.field) == (2, field)
        assert "no whitespace or control characters" in str(info.value)  # not "unknown id"


@pytest.mark.reliability(
    area=AREA, reader="TREC run file",
    fault="tapt bm25 --run on ids with non-ASCII letters (q-\u00e9, d-\u00e9); a run with an "
          "id holding a space written through the API",
    behaviour="the run file has 6 fields a line and pytrec_eval.parse_run reads it back; the "
              "writer refuses an id with a space and writes nothing")
def test_run_files_always_parse_back(tmp_path, quiet_cli, capsys):
    import pytrec_eval

    from tapt.retrieval.evaluate import EvalReport

    folder = with_query_id(tmp_path / "data", "q-\u00e9")
    run = tmp_path / "run.trec"
    assert quiet_cli.main(["bm25", "--data", str(folder), "--split", "test", "--quiet",
                           "--run", str(run)]) == 0
    lines = run.read_text(encoding="utf-8").splitlines()
    assert lines and all(len(line.split()) == 6 for line in lines)
    with run.open(encoding="utf-8") as handle:
        parsed = pytrec_eval.parse_run(handle)
    assert "q-\u00e9" in parsed and set(parsed) == {"q4", "q5", "q-\u00e9"}

    report = EvalReport(metrics={}, per_query={}, run={"query 0": {"d1": 1.0}}, timings={})
    with pytest.raises(DataError, match="query id 'query 0'"):
        report.write_trec_run(tmp_path / "bad.trec")
    assert not (tmp_path / "bad.trec").exists()
    report = EvalReport(metrics={}, per_query={}, run={"q": {"d1": 1.0}}, timings={})
    report.write_trec_run(tmp_path / "tag.trec", tag="my model\t1")  # the tag is made safe
    assert (tmp_path / "tag.trec").read_text().split() == ["q", "Q0", "d1", "1", "1.0",
                                                           "my_model_1"]


# --------------------------------------------------------------------------- 13. relevance

def test_the_auto_rule_and_overrides():
    assert choose_rule("auto", 3) == FORMBENCH and choose_rule("auto", 7) == FORMBENCH
    assert choose_rule("auto", 1) == BEIR and choose_rule("auto", 2) == BEIR
    assert choose_rule(1, 3) == BEIR and choose_rule(3, 1) == FORMBENCH
    custom = choose_rule(2)
    assert (custom.relevant_from, custom.hard_negative, custom.soft_negative) == (2, 1, None)
    for bad in (0, -1, True, 2.5, "two", None):
        with pytest.raises(ValueError, match="relevant_from must be auto or a grade >= 1"):
            choose_rule(bad)


@pytest.mark.parametrize("grades", [BEIR_01, BEIR_012], ids=["0-1", "0-1-2"])
@pytest.mark.reliability(
    area=AREA, reader="qrels (relevance rule)",
    fault="a public-BEIR-style folder whose qrels mark relevant passages with 1 (0/1, and "
          "0/1/2): tapt data validate, tapt bm25 with and without --lenient",
    behaviour="auto picks the BEIR rule (grade >= 1 relevant) with a note; validates; BM25 "
              "metrics are computed under it (not 0.0000) and the result JSON records the rule")
def test_beir_style_qrels_validate_and_evaluate(grades, synth_tiny, tmp_path, quiet_cli, capsys,
                                                caplog):
    folder = regraded(synth_tiny, tmp_path / "beir", grades)
    caplog.set_level(logging.INFO, logger="tapt")
    assert quiet_cli.main(["data", "validate", str(folder)]) == 0
    assert "relevance rule beir (grade >= 1 relevant" in out_text(capsys)
    assert any("relevance rule beir" in r.getMessage() and "highest grade is" in r.getMessage()
               for r in caplog.records)
    for lenient in ([], ["--lenient"]):
        output = tmp_path / f"bm25{len(lenient)}.json"
        assert quiet_cli.main(["bm25", "--data", str(folder), "--split", "test", "--quiet",
                               "--output", str(output), *lenient]) == 0
        result = json.loads(output.read_text())
        assert result["evaluated"]["relevance"] == {"name": "beir", "relevant_from": 1,
                                                    "hard_negative": None,
                                                    "soft_negative": None}
        assert result["binary_ndcg@10"] > 0.3 and result["mrr@10"] > 0.3
        assert result["recall@100"] > 0.9
        if grades is BEIR_01:  # gains 1 and 0: graded nDCG is binary nDCG
            assert result["graded_ndcg@10"] == pytest.approx(result["binary_ndcg@10"])
    capsys.readouterr()
    assert quiet_cli.main(["data", "stats", str(folder)]) == 0
    assert "relevant (grade 1)" in out_text(capsys)


@pytest.mark.reliability(
    area=AREA, reader="qrels (relevance rule)",
    fault="tapt bm25 --lenient --relevant-from 3 on 0/1 qrels (no query has a relevant "
          "passage under the rule)",
    behaviour="refused, exit 2, naming qrels/test.tsv and the rule, never a table of zeros")
def test_an_evaluation_without_any_relevant_passage_is_an_error(synth_tiny, tmp_path, quiet_cli,
                                                                capsys):
    folder = regraded(synth_tiny, tmp_path / "beir", BEIR_01)
    output = tmp_path / "m.json"
    assert quiet_cli.main(["bm25", "--data", str(folder), "--split", "test", "--quiet",
                           "--lenient", "--relevant-from", "3", "--output", str(output)]) == 2
    message = out_text(capsys)
    assert f"{folder / 'qrels' / 'test.tsv'}: no query has a relevant passage" in message
    assert "formbench (grade >= 3 relevant" in message and "0.0000" not in message
    assert not output.exists()
    with pytest.raises(ValueError, match="no query has a relevant passage"):
        tapt.score_run({"q": {"d": 1}}, {"q": {"d": 1.0}}, relevant_from=3)
    with pytest.raises(SystemExit) as exit_info:  # argparse: 0 means judged non-relevant
        quiet_cli.main(["bm25", "--data", str(folder), "--relevant-from", "0"])
    assert exit_info.value.code == 2


def test_relevant_from_sets_the_graded_negatives(synth_tiny, tmp_path):
    """--relevant-from 2 on 0/1/2 qrels: grade 2 anchors, grade 1 the hard negative."""
    from tapt.data.triplets import build_rows

    folder = regraded(synth_tiny, tmp_path / "trec", BEIR_012)
    beir = tapt.load_data(folder, splits=["train"])
    rows, stats = build_rows(beir, "train")
    judged = beir.split("train")
    assert len(rows) == sum(grade >= 1 for docs in judged.values() for grade in docs.values())
    assert all(set(row) == {"query", "positive"} for row in rows) and stats.pairs == len(rows)
    with pytest.raises(ValueError, match="no soft-negative grade"):
        build_rows(beir, "train", soft_negative=True)
    # mined negatives add columns after the pair; a relevant passage is refused as one
    from tapt.data.mined import read_mined

    query_id = next(iter(judged))
    relevant = beir.rule.relevant_ids(judged[query_id])[0]
    other = next(d for d in beir.corpus if d not in judged[query_id])
    mined_file = tmp_path / "mined.jsonl"
    mined_file.write_text(json.dumps({"query_id": query_id, "negatives": [{"id": other}]})
                          + "\n", encoding="utf-8")
    mined = read_mined(mined_file, beir, "train")
    rows, _ = build_rows(beir, "train", mined=mined, mined_per_row=1, missing="pair")
    assert {tuple(row) for row in rows} == {("query", "positive"),
                                            ("query", "positive", "mined_1")}
    # mined negatives are this rule's only negatives: "drop" leaves out queries without one
    rows, _ = build_rows(beir, "train", mined=mined, mined_per_row=1)
    assert {tuple(row) for row in rows} == {("query", "positive", "mined_1")}
    assert {row["query"] for row in rows} == {beir.queries[query_id]}
    mined_file.write_text(json.dumps({"query_id": query_id, "negatives": [{"id": relevant}]})
                          + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="a positive cannot be a negative"):
        read_mined(mined_file, beir, "train")
    strict = tapt.load_data(folder, splits=["train"], relevant_from=2)
    rows, _ = build_rows(strict, "train")
    assert len(rows) == len(judged) and all(set(row) == {"query", "positive", "negative"}
                                            for row in rows)


@pytest.mark.parametrize("grades", [BEIR_01, BEIR_012], ids=["0-1", "0-1-2"])
@pytest.mark.reliability(
    area=AREA, reader="qrels (relevance rule)",
    fault="tapt train --test on a folder in the usual BEIR 0/1 form (and 0/1/2)",
    behaviour="trains on (query, relevant passage) pairs with in-batch negatives, evaluates "
              "dev and test, exports; results.json records the rule")
def test_beir_style_qrels_train_end_to_end(grades, synth_tiny, tmp_path, make_recipe, quiet_cli):
    folder = regraded(synth_tiny, tmp_path / "beir-data", grades)
    recipe_file, output = make_recipe("run", data_path=folder)
    assert quiet_cli.main(["train", str(recipe_file), "--test"]) == 0
    results = json.loads((output / "results.json").read_text())
    assert results["status"] == "finished"
    assert results["relevance"]["name"] == "beir"
    assert set(results["summary"]) >= {"zero-shot dev", "zero-shot test", "TAPT test"}
    for metrics in results["summary"].values():
        assert all(0.0 <= value <= 1.0 for value in metrics.values())
    assert (output / "final" / "model.safetensors").is_file()


def test_cranfield_keeps_the_formbench_rule(cranfield_path):
    """Cranfield's qrels hold grade 3: auto keeps FormBench's rule (as before); relevant_from
    1 counts every judged passage."""
    formbench = tapt.load_data(cranfield_path, splits=["test"], require_anchor=False,
                               allow_empty=True)
    assert formbench.rule == FORMBENCH
    beir = tapt.load_data(cranfield_path, splits=["test"], relevant_from=1, allow_empty=True)
    assert beir.rule == BEIR
