"""Results compared across different data,
and numbers that are finite but absurd.

Class 3: every result file records the content fingerprint of the data it evaluated
(``evaluated.data_fingerprint``: corpus, queries, the split's qrels, the sub-corpus's ids),
its split, relevance rule and top-k; ``tapt compare`` refuses to pair results that differ
in any of them, naming the field and both files (``--allow-different`` lifts corpus,
sub-corpus or top-k); files without a fingerprint are compared with a warning.

Class 5: every numeric flag and recipe key has its range in ``tapt.util.bounds``, checked when
the command line or the recipe is parsed; a value that overflows or empties the float32 it
is used in is refused with the reason.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import shutil
import typing
from pathlib import Path

import pytest
import yaml

from robustness.conftest import QUERIES, jsonl_lines, qrels_lines, write_dataset
from tapt.cli import build_parser
from tapt.data.beir import DataError
from tapt.util import bounds
from tapt.util.bounds import Bound

AREA_PAIRING = "comparisons across data"
AREA_BOUNDS = "numeric ranges"


def mark(area: str, reader: str, fault: str, behaviour: str):
    return pytest.mark.reliability(area=area, reader=reader, fault=fault, behaviour=behaviour)


def out_text(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


# --------------------------------------------------------------------------- helpers

def bm25_result(cli, folder: Path, output: Path, *extra: str) -> Path:
    """``tapt bm25 --data FOLDER --output OUTPUT`` (test split unless ``extra`` says)."""
    assert cli.main(["bm25", "--data", str(folder), "--quiet", "--output", str(output),
                     *extra]) == 0
    return output


def other_query_texts(folder: Path) -> Path:
    """The tiny dataset with the same ids and other query texts."""
    queries = [{"_id": q["_id"], "text": f"which pigment in paint {i}?"}
               for i, q in enumerate(QUERIES, start=1)]
    return write_dataset(folder, queries=b"\n".join(jsonl_lines(queries)) + b"\n")


def compare_refused(case, argv, tmp_path, capsys, *, names: list[str], field: str):
    """``tapt compare ARGV --output --markdown`` refused: exit 2, naming ``field`` and every
    file in ``names``, with no output written."""
    out = tmp_path / "cmp"
    outputs = [out / "compare.json", out / "compare.md", out / "compare.png"]
    outcome = case.cli(["compare", *argv, "--output", str(outputs[0]), "--markdown",
                        str(outputs[1])], capsys, watch=[tmp_path], must_not_exist=outputs)
    outcome.assert_refused(contains=f"differ in {field} ")
    for name in names:
        assert name in outcome.printed, (name, outcome.printed)
    return outcome


# --------------------------------------------------------------------------- class 3: issue

@mark(AREA_PAIRING, "tapt compare --baseline",
      "results on two different folders both named tiny (same ids, other query texts) "
      "compared with a CI and a p-value (rc 0)",
      "refused with exit 2, naming the field (queries) and both files; nothing written")
def test_results_on_two_folders_of_one_name_are_not_paired(tmp_path, reliability_case,
                                                           quiet_cli, capsys):
    first = write_dataset(tmp_path / "a" / "tiny")
    second = other_query_texts(tmp_path / "b" / "tiny")
    a = bm25_result(quiet_cli, first, tmp_path / "a.json")
    b = bm25_result(quiet_cli, second, tmp_path / "b.json")
    case = reliability_case("tapt compare --baseline", "two folders named tiny, other "
                            "query texts", area=AREA_PAIRING)
    compare_refused(case, [f"A={a}", f"B={b}", "--baseline", "A"], tmp_path, capsys,
                    names=[str(a), str(b)], field="queries")


@mark(AREA_PAIRING, "tapt compare --baseline",
      "results under --relevant-from 2 and 3 on one folder compared with a p-value",
      "refused with exit 2, naming the relevance rule and both files")
def test_results_under_different_relevance_rules_are_not_paired(dataset_dir, tmp_path,
                                                                reliability_case, quiet_cli,
                                                                capsys):
    three = bm25_result(quiet_cli, dataset_dir, tmp_path / "r3.json", "--relevant-from", "3")
    two = bm25_result(quiet_cli, dataset_dir, tmp_path / "r2.json", "--relevant-from", "2")
    case = reliability_case("tapt compare --baseline", "--relevant-from 2 vs 3",
                            area=AREA_PAIRING)
    outcome = compare_refused(case, [f"A={three}", f"B={two}", "--baseline", "A"], tmp_path,
                              capsys, names=[str(three), str(two)], field="relevance")
    assert "relevant from grade 3" in outcome.printed and "grade 2" in outcome.printed


@mark(AREA_PAIRING, "tapt compare",
      "results with --top-k 50 and 100 on one folder compared",
      "refused naming top-k; --allow-different top-k compares them")
def test_results_with_different_top_k_need_the_flag(dataset_dir, tmp_path, reliability_case,
                                                    quiet_cli, capsys):
    deep = bm25_result(quiet_cli, dataset_dir, tmp_path / "k100.json")
    shallow = bm25_result(quiet_cli, dataset_dir, tmp_path / "k50.json", "--top-k", "50")
    case = reliability_case("tapt compare", "--top-k 50 vs 100", area=AREA_PAIRING)
    outcome = compare_refused(case, [f"A={deep}", f"B={shallow}", "--baseline", "A"],
                              tmp_path, capsys, names=[str(deep), str(shallow)], field="top-k")
    assert "--allow-different top-k" in outcome.printed
    assert quiet_cli.main(["compare", f"A={deep}", f"B={shallow}", "--baseline", "A",
                           "--allow-different", "top-k"]) == 0


# --------------------------------------------------------------------------- class 3: variants

def two_distinct_seeds(pool: list[str]) -> tuple[int, int]:
    """Two seeds whose 1-passage samples of ``pool`` differ (subcorpus_ids' sampler)."""
    first = random.Random(0).sample(sorted(pool), 1)
    seed = next(s for s in range(1, 100) if random.Random(s).sample(sorted(pool), 1) != first)
    return 0, seed


@mark(AREA_PAIRING, "tapt compare --baseline",
      "results on sub-corpora of other distractors (--distractors 1, seeds that sample "
      "other passages)", "refused naming the sub-corpus and both files")
def test_results_on_other_distractor_samples_are_not_paired(dataset_dir, tmp_path,
                                                            reliability_case, quiet_cli,
                                                            capsys):
    first, second = two_distinct_seeds(["d4", "d6"])  # the passages test.tsv does not judge
    a = bm25_result(quiet_cli, dataset_dir, tmp_path / "s0.json", "--distractors", "1",
                    "--seed", str(first))
    b = bm25_result(quiet_cli, dataset_dir, tmp_path / "s1.json", "--distractors", "1",
                    "--seed", str(second))
    case = reliability_case("tapt compare --baseline", "other distractor samples",
                            area=AREA_PAIRING)
    compare_refused(case, [f"A={a}", f"B={b}", "--baseline", "A"], tmp_path, capsys,
                    names=[str(a), str(b)], field="sub-corpus")


@mark(AREA_PAIRING, "tapt compare", "a folder whose test.tsv grades one pair otherwise "
      "(same corpus and queries)", "refused naming the qrels")
def test_results_on_other_judgments_are_not_paired(dataset_dir, tmp_path, reliability_case,
                                                   quiet_cli, capsys):
    lines = qrels_lines("test")
    lines[2] = lines[2].replace(b"\t2", b"\t1")  # q4 d2: hard negative -> soft
    regraded = write_dataset(tmp_path / "regraded" / "data", test=b"\n".join(lines) + b"\n")
    a = bm25_result(quiet_cli, dataset_dir, tmp_path / "a.json")
    b = bm25_result(quiet_cli, regraded, tmp_path / "b.json")
    case = reliability_case("tapt compare", "other qrels, same corpus and queries",
                            area=AREA_PAIRING)
    compare_refused(case, [f"A={a}", f"B={b}"], tmp_path, capsys, names=[str(a), str(b)],
                    field="qrels")


@mark(AREA_PAIRING, "tapt compare --baseline", "byte-identical copies of one dataset under "
      "two folder names, given one column label (--corpus)",
      "compared (the fingerprint is the content, not the name), with the test")
def test_a_copy_of_the_same_data_is_paired(dataset_dir, tmp_path, quiet_cli, capsys):
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(dataset_dir, copy)
    a = bm25_result(quiet_cli, dataset_dir, tmp_path / "a.json")
    b = bm25_result(quiet_cli, copy, tmp_path / "b.json", "--k1", "0.9")
    output = tmp_path / "cmp.json"
    assert quiet_cli.main(["compare", f"A={a}", f"B={b}", "--corpus", "data=tiny",
                           "--corpus", "copy=tiny", "--baseline", "A", "--output",
                           str(output)]) == 0
    data = json.loads(output.read_text(encoding="utf-8"))
    assert data["corpora"] == ["tiny"] and "warnings" not in data
    assert "tiny" in next(s for s in data["systems"] if s["name"] == "B")["vs_baseline"]


@mark(AREA_PAIRING, "tapt compare --baseline", "C0 against C1 per query: the same queries and "
      "qrels over two corpora, put in one column with --corpus",
      "refused naming the corpus; --allow-different corpus pairs them")
def test_other_corpora_with_the_same_queries_pair_only_when_allowed(dataset_dir, tmp_path,
                                                                    reliability_case,
                                                                    quiet_cli, capsys):
    lines = (dataset_dir / "corpus.jsonl").read_bytes().splitlines()
    lines[3] = json.dumps({"_id": "d4", "title": "Solvent", "text": "an unrelated "
                           "distractor"}).encode()  # d4 is not judged in test
    c1 = write_dataset(tmp_path / "c1", corpus=b"\n".join(lines) + b"\n")
    a = bm25_result(quiet_cli, dataset_dir, tmp_path / "c0.json")
    b = bm25_result(quiet_cli, c1, tmp_path / "c1.json")
    argv = [f"C0={a}", f"C1={b}", "--corpus", "data=FB", "--corpus", "c1=FB",
            "--baseline", "C0"]
    case = reliability_case("tapt compare --baseline", "other corpus, same queries and qrels",
                            area=AREA_PAIRING)
    compare_refused(case, argv, tmp_path, capsys, names=[str(a), str(b)], field="corpus")
    assert quiet_cli.main(["compare", *argv, "--allow-different", "corpus"]) == 0
    # queries can never be lifted: argparse refuses the choice
    with pytest.raises(SystemExit):
        quiet_cli.main(["compare", *argv, "--allow-different", "queries"])


def without_fingerprint(path: Path) -> Path:
    data = json.loads(path.read_text(encoding="utf-8"))
    data["evaluated"].pop("data_fingerprint", None)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@mark(AREA_PAIRING, "tapt compare", "result files without a fingerprint (no "
      "evaluated.data_fingerprint: not written by tapt eval / tapt bm25)", "compared with a "
      "warning naming the files (log, table caption, compare.json 'warnings'); their split, "
      "relevance rule and top-k still checked")
def test_result_files_without_a_fingerprint_are_compared_with_a_warning(
        dataset_dir, tmp_path, quiet_cli, capsys, caplog):
    from tapt.analysis.compare import compare_results

    a = without_fingerprint(bm25_result(quiet_cli, dataset_dir, tmp_path / "a.json"))
    b = without_fingerprint(bm25_result(quiet_cli, dataset_dir, tmp_path / "b.json",
                                        "--k1", "0.9"))
    caplog.set_level(logging.WARNING)
    comparison = compare_results([f"A={a}", f"B={b}"], baseline="A")
    warned = [r.getMessage() for r in caplog.records if "no data fingerprint" in r.getMessage()]
    assert len(warned) == 1 and str(a) in warned[0] and str(b) in warned[0]
    assert comparison.warnings == warned and comparison.to_dict()["warnings"] == warned
    assert "re-run" in warned[0]
    dev = without_fingerprint(bm25_result(quiet_cli, dataset_dir, tmp_path / "dev.json",
                                          "--split", "dev"))
    with pytest.raises(ValueError, match=r"differ in split \(test vs dev\)"):
        compare_results([f"A={a}", f"B={dev}"])


def with_null_fingerprint(path: Path) -> Path:
    """The result with a ``data_fingerprint`` that records no digest (all null), as a
    dataset built in memory gives, or a hand-edited file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data["evaluated"]["data_fingerprint"] = {"algorithm": "sha256", "corpus": None,
                                             "queries": None, "qrels": None,
                                             "sub_corpus": None}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@mark(AREA_PAIRING, "tapt compare", "result files whose data_fingerprint holds only nulls "
      "(no digest), on folders with other query texts: paired as fingerprinted, silently",
      "compared as unfingerprinted files are: with the warning naming both files")
def test_a_fingerprint_of_nulls_counts_as_none(dataset_dir, tmp_path, quiet_cli, caplog):
    from tapt.analysis.compare import compare_results
    from tapt.analysis.pairing import data_key

    other = other_query_texts(tmp_path / "other" / "data")
    a = with_null_fingerprint(bm25_result(quiet_cli, dataset_dir, tmp_path / "a.json"))
    b = with_null_fingerprint(bm25_result(quiet_cli, other, tmp_path / "b.json"))
    assert not data_key(json.loads(a.read_text(encoding="utf-8")), str(a)).fingerprinted
    caplog.set_level(logging.WARNING)
    comparison = compare_results([f"A={a}", f"B={b}"], baseline="A")
    warned = [r.getMessage() for r in caplog.records if "no data fingerprint" in r.getMessage()]
    assert len(warned) == 1 and str(a) in warned[0] and str(b) in warned[0], warned
    assert comparison.warnings == warned


@mark(AREA_PAIRING, "tapt compare (C1/C0 retention)", "a system's C0 result on the test split "
      "and its C1 result on dev: a retention of two different query sets",
      "refused naming the split; C0 and C1 may differ in corpus only")
def test_retention_needs_the_same_split(tmp_path, quiet_cli, capsys):
    from tapt.analysis.compare import compare_results

    c0 = write_dataset(tmp_path / "formbench-random")
    c1 = write_dataset(tmp_path / "formbench-structured")
    test = bm25_result(quiet_cli, c0, tmp_path / "c0.json")
    dev = bm25_result(quiet_cli, c1, tmp_path / "c1.json", "--split", "dev")
    with pytest.raises(ValueError, match=r"retention: .* differ in split \(test vs dev\)"):
        compare_results([str(test), str(dev)])
    same = bm25_result(quiet_cli, c1, tmp_path / "c1-test.json")
    assert compare_results([str(test), str(same)]).corpora == ["C0", "C1"]


@mark(AREA_PAIRING, "tapt compare (seeds)", "two files labelled as seeds of one system, "
      "evaluated on different queries", "refused naming the queries and both files")
def test_seeds_on_different_data_are_refused(dataset_dir, tmp_path, quiet_cli):
    from tapt.analysis.compare import compare_results

    other = other_query_texts(tmp_path / "other" / "data")
    a = bm25_result(quiet_cli, dataset_dir, tmp_path / "s0.json")
    b = bm25_result(quiet_cli, other, tmp_path / "s1.json")
    with pytest.raises(ValueError, match="differ in queries") as caught:
        compare_results([f"M={a}", f"M={b}"])
    assert str(a) in str(caught.value) and str(b) in str(caught.value)


@mark(AREA_PAIRING, "tapt report --bm25", "a BM25 reference file evaluated on another data "
      "folder, or on the test split, drawn on the run's dev curve",
      "refused naming the field and the file")
def test_report_refuses_a_bm25_reference_on_other_data(dataset_dir, tmp_path, quiet_cli,
                                                       capsys):
    run = tmp_path / "run"
    run.mkdir()
    recipe = {"model": {"name": "m"}, "data": {"path": str(dataset_dir), "dev_split": "dev"},
              "output_dir": str(run)}
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    other = other_query_texts(tmp_path / "other" / "data")
    elsewhere = bm25_result(quiet_cli, other, tmp_path / "other.json", "--split", "dev")
    on_test = bm25_result(quiet_cli, dataset_dir, tmp_path / "test.json")
    on_dev = bm25_result(quiet_cli, dataset_dir, tmp_path / "dev.json", "--split", "dev")
    for reference, field in ((elsewhere, "queries"), (on_test, "split")):
        assert quiet_cli.main(["report", str(run), "--bm25", str(reference)]) == 2
        printed = out_text(capsys)
        assert f"differ in {field} " in printed and str(reference) in printed, printed
        assert not (run / "report.md").exists()
    assert quiet_cli.main(["report", str(run), "--bm25", str(on_dev)]) == 0


def dev_run(tmp_path: Path, data: Path, *, relevance: dict | None = None, **extra) -> Path:
    """A run folder whose recipe reads ``data`` (dev split; ``extra``: more data keys) and,
    with ``relevance``, a results.json recording that rule (as a finished run does)."""
    run = tmp_path / "run"
    run.mkdir()
    recipe = {"model": {"name": "m"}, "data": {"path": str(data), "dev_split": "dev", **extra},
              "output_dir": str(run)}
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    if relevance is not None:
        (run / "results.json").write_text(json.dumps({"status": "finished", "summary": {},
                                                      "relevance": relevance}),
                                          encoding="utf-8")
    return run


@mark(AREA_PAIRING, "tapt report --bm25", "a BM25 reference on the run's dev data under "
      "another relevance rule, at another --top-k, or on another dev sub-corpus (only split, "
      "corpus, queries and qrels were checked)",
      "refused naming the field (relevance, top-k, sub-corpus) and the file; the reference "
      "evaluated as the run's dev is drawn")
def test_report_refuses_a_bm25_reference_under_other_settings(dataset_dir, tmp_path,
                                                              quiet_cli, capsys):
    from tapt.data.relevance import FORMBENCH

    run = dev_run(tmp_path, dataset_dir, relevance=FORMBENCH.to_dict(), dev_distractors=1,
                  dev_seed=0)
    dev = ["--split", "dev", "--distractors", "1", "--seed", "0"]
    graded_2 = bm25_result(quiet_cli, dataset_dir, tmp_path / "r2.json", *dev,
                           "--relevant-from", "2")
    shallow = bm25_result(quiet_cli, dataset_dir, tmp_path / "k50.json", *dev, "--top-k", "50")
    whole = bm25_result(quiet_cli, dataset_dir, tmp_path / "whole.json", "--split", "dev")
    same = bm25_result(quiet_cli, dataset_dir, tmp_path / "same.json", *dev,
                       "--relevant-from", "3")
    for reference, field in ((graded_2, "relevance"), (shallow, "top-k"),
                             (whole, "sub-corpus")):
        assert quiet_cli.main(["report", str(run), "--bm25", str(reference)]) == 2
        printed = out_text(capsys)
        assert f"differ in {field} " in printed and str(reference) in printed, printed
        assert not (run / "report.md").exists()
    assert quiet_cli.main(["report", str(run), "--bm25", str(same)]) == 0
    # The refusal names the command that makes a reference which pairs, and it does.
    assert quiet_cli.main(["report", str(run), "--bm25", str(whole)]) == 2
    suggested = re.search(r"`tapt (bm25 [^`]*) --output BM25\.json`",
                          " ".join(out_text(capsys).split()))
    assert suggested and "--distractors 1 --seed 0" in suggested.group(1), suggested
    made = tmp_path / "suggested.json"
    assert quiet_cli.main([*suggested.group(1).split(), "--output", str(made)]) == 0
    (run / "report.md").unlink()
    assert quiet_cli.main(["report", str(run), "--bm25", str(made)]) == 0


def cases_refused(cli, capsys, argv: list[str], field: str, names: list[Path],
                  output: Path) -> None:
    """``tapt cases ARGV --output OUTPUT`` refused (exit 2) naming ``field`` and each of
    ``names``; nothing written."""
    assert cli.main(["cases", *argv, "--output", str(output)]) == 2
    printed = out_text(capsys)
    assert f"differ in {field} " in printed, printed
    for name in names:
        assert str(name) in printed, (name, printed)
    assert not output.exists()


@mark(AREA_PAIRING, "tapt cases", "result files on two folders of one name (other query "
      "texts), under --relevant-from 2 and 3, at --top-k 50 and 100; --data another folder "
      "than the results were evaluated on (only the split and the passage ids were checked)",
      "refused with exit 2, naming the field and the files; nothing written")
def test_cases_refuses_results_of_other_data_or_settings(dataset_dir, tmp_path, quiet_cli,
                                                         capsys):
    other = other_query_texts(tmp_path / "other" / "data")
    save = ["--save-run", "5"]
    a = bm25_result(quiet_cli, dataset_dir, tmp_path / "a.json", *save)
    elsewhere = bm25_result(quiet_cli, other, tmp_path / "elsewhere.json", *save)
    graded_2 = bm25_result(quiet_cli, dataset_dir, tmp_path / "r2.json", *save,
                           "--relevant-from", "2")
    shallow = bm25_result(quiet_cli, dataset_dir, tmp_path / "k50.json", *save,
                          "--top-k", "50")
    data = ["--data", str(dataset_dir)]
    for b, field in ((elsewhere, "queries"), (graded_2, "relevance"), (shallow, "top-k")):
        cases_refused(quiet_cli, capsys, [f"A={a}", f"B={b}", *data], field, [a, b],
                      tmp_path / "cases.md")
    cases_refused(quiet_cli, capsys, [str(a), "--data", str(other)], "queries", [a, other],
                  tmp_path / "cases.md")


@mark(AREA_PAIRING, "tapt cases --relevant-from", "result files evaluated under "
      "--relevant-from 2, cases run without the flag (it applied auto: grade 3 on these "
      "qrels) or with --relevant-from 3",
      "the results' recorded rule by default (grade >= 2); another one refused naming the "
      "relevance rule")
def test_cases_defaults_to_the_results_relevance_rule(dataset_dir, tmp_path, quiet_cli,
                                                      capsys):
    save = ["--save-run", "5", "--relevant-from", "2"]
    a = bm25_result(quiet_cli, dataset_dir, tmp_path / "a.json", *save)
    b = bm25_result(quiet_cli, dataset_dir, tmp_path / "b.json", *save, "--k1", "0.9")
    output = tmp_path / "cases.md"
    assert quiet_cli.main(["cases", f"A={a}", f"B={b}", "--data", str(dataset_dir),
                           "--output", str(output)]) == 0
    markdown = output.read_text(encoding="utf-8")
    assert "relevant: grade >= 2 (grade >= 2 relevant" in markdown, markdown[:400]
    assert "(grade 2)" in markdown  # q4's grade-2 passage d2 is listed as relevant
    output.unlink()
    capsys.readouterr()
    cases_refused(quiet_cli, capsys, [f"A={a}", f"B={b}", "--data", str(dataset_dir),
                                      "--relevant-from", "3"], "relevance", [a], output)


@mark(AREA_PAIRING, "tapt bm25 / eval --output (data_fingerprint)", "queries.jsonl edited "
      "while the retriever runs", "the fingerprint is of the files as read (taken right "
      "after loading), not of the edited file")
def test_the_fingerprint_is_taken_before_the_work(dataset_dir, tmp_path, quiet_cli,
                                                  monkeypatch):
    import hashlib

    from tapt.retrieval.bm25 import BM25Retriever

    queries = dataset_dir / "queries.jsonl"
    original = hashlib.sha256(queries.read_bytes()).hexdigest()
    retrieve = BM25Retriever.retrieve

    def edit_while_ranking(self, *args, **kwargs):
        queries.write_bytes(queries.read_bytes().replace(b"binder", b"pigment"))
        return retrieve(self, *args, **kwargs)

    monkeypatch.setattr(BM25Retriever, "retrieve", edit_while_ranking)
    result = bm25_result(quiet_cli, dataset_dir, tmp_path / "r.json")
    fingerprint = json.loads(result.read_text(encoding="utf-8"))["evaluated"][
        "data_fingerprint"]
    assert fingerprint["queries"] == original
    assert fingerprint["corpus"] == hashlib.sha256(
        (dataset_dir / "corpus.jsonl").read_bytes()).hexdigest()
    assert fingerprint["sub_corpus"] is None  # the whole corpus


def test_training_test_results_record_the_data_as_loaded(dataset_dir):
    """``tapt train --test`` (``load_recipe_data``) takes the digests when it loads the data:
    test.json names the files as they were at the start of training."""
    import hashlib

    from tapt.recipe import Recipe
    from tapt.retrieval.bm25 import BM25Retriever
    from tapt.retrieval.evaluate import evaluate
    from tapt.training.inputs import load_recipe_data

    recipe = Recipe.model_validate({"model": {"name": "m"}, "output_dir": "run",
                                    "data": {"path": str(dataset_dir)}})
    qrels = dataset_dir / "qrels" / "test.tsv"
    before = hashlib.sha256(qrels.read_bytes()).hexdigest()
    dataset = load_recipe_data(recipe, with_test=True)
    qrels.write_bytes(qrels.read_bytes() + b"q6\td1\t1\n")  # edited during training
    report = evaluate(BM25Retriever(), dataset, "test")
    assert report.info["data_fingerprint"]["qrels"] == before


# --------------------------------------------------------------------------- class 5: issue

@mark(AREA_BOUNDS, "tapt bm25 --k1 / tapt score --k1", "--k1 1e100 (every metric 0.0000, "
      "rc 0) and tapt score --k1 1e308 (every score 0.0)",
      "refused by argparse, exit 2, naming the flag, its range and the float32 reason")
@pytest.mark.parametrize("argv", [["bm25", "--k1", "1e100"],
                                  ["score", "--teacher", "bm25", "--k1", "1e308",
                                   "--output", "scores.jsonl"]], ids=["bm25", "score"])
def test_a_k1_that_empties_float32_is_refused(argv, dataset_dir, tmp_path, capsys):
    from tapt.cli import main

    with pytest.raises(SystemExit) as exited:
        main([*argv, "--data", str(dataset_dir)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --k1: must be in [0, 1000]" in err and "float32" in err, err
    assert not (tmp_path / "scores.jsonl").exists()


def teacher_file(path: Path, score) -> Path:
    path.write_text("".join(json.dumps({"query_id": q, "passage_id": d, "score": s,
                                        "teacher": "bm25", "data": "x", "split": "train",
                                        "mined": None}) + "\n"
                            for (q, d, _), s in zip(
                                [("q1", "d1", 3), ("q1", "d2", 2), ("q2", "d3", 3),
                                 ("q2", "d4", 1)], [score, 1.0, 2.0, 3.0], strict=True)),
                    encoding="utf-8")
    return path


@mark(AREA_BOUNDS, "loss.teacher_scores (tapt train)", "a teacher score of 1e308 with "
      "teacher_normalize: none (passes validation, overflows float32, the run stops with "
      "learning-rate advice)", "refused before the model loads, exit 2, naming the file, "
      "line 1 and the field score, with the range")
@pytest.mark.parametrize("score", [1e308, 1e30, -2e6], ids=["1e308", "1e30", "-2e6"])
def test_an_absurd_teacher_score_is_refused_before_training(score, dataset_dir, tmp_path,
                                                            quiet_cli, capsys):
    import tapt
    from tapt.retrieval.teacher_scores import read_teacher_scores

    scores = teacher_file(tmp_path / "scores.jsonl", score)
    with pytest.raises(DataError) as caught:
        read_teacher_scores(scores, tapt.load_data(dataset_dir), "train")
    assert (caught.value.path, caught.value.line, caught.value.field) == (
        str(scores), 1, "score")
    recipe = {"model": {"name": "no-model-is-loaded"}, "data": {"path": str(dataset_dir)},
              "loss": {"name": "margin_mse", "teacher_scores": str(scores),
                       "teacher_normalize": "none"},
              "output_dir": str(tmp_path / "run")}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    assert quiet_cli.main(["train", str(path)]) == 2
    printed = out_text(capsys)
    assert f"{scores}:1: field 'score':" in printed and "[-1000000, 1000000]" in printed


# --------------------------------------------------------------------------- class 5: variants

@mark(AREA_BOUNDS, "tapt eval --rrf-k, compare --resamples, data synth --queries",
      "--rrf-k 1e300 (every rank weighs 1e-300), --resamples 10**12 (scipy allocates "
      "resamples x queries), --queries 10**12 (memory without bound)",
      "refused by argparse, exit 2, naming the flag and the range")
@pytest.mark.parametrize("argv,flag", [
    (["eval", "--model", "m", "--data", "d", "--hybrid", "bm25", "--rrf-k", "1e300"],
     "--rrf-k"),
    (["compare", "r.json", "--resamples", "1000000000000"], "--resamples"),
    (["eval", "--model", "m", "--data", "d", "--top-k", "1000000000"], "--top-k"),
    (["eval", "--model", "m", "--data", "d", "--batch-size", "1000000000"], "--batch-size"),
], ids=["rrf-k", "resamples", "top-k", "batch-size"])
def test_other_absurd_flags_are_refused(argv, flag, capsys):
    from tapt.cli import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: must be in [" in err, err


@mark(AREA_BOUNDS, "recipe (loss.scale, training.learning_rate, loss.grade_targets, "
      "loss.matryoshka_weights)", "finite but absurd values: a logit scale of 1e39 (float32 "
      "logits overflow), a learning rate of 1e10, a grade target of 1e30",
      "refused when the recipe is loaded, naming the key, the range and the reason")
@pytest.mark.parametrize("override,key,says", [
    ("loss.scale=1e39", "loss.scale", "float32"),
    ("training.learning_rate=1e10", "training.learning_rate", "(0, 1]"),
    ("training.epochs=1e300", "training.epochs", "(0, 10000]"),
    ("loss.matryoshka_weights=[1, 1e38, 1, 1, 1]", "loss.matryoshka_weights", "float32"),
], ids=["scale", "learning_rate", "epochs", "matryoshka_weights"])
def test_absurd_recipe_values_are_refused_at_load(override, key, says, tmp_path):
    from tapt.recipe import RecipeError, load_recipe

    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({"model": {"name": "m"}, "data": {"path": "d"},
                                    "output_dir": "run"}), encoding="utf-8")
    with pytest.raises(RecipeError) as caught:
        load_recipe(path, [override])
    message = str(caught.value)
    assert f"  {key}:" in message and says in message, message


def test_grade_targets_beyond_float32_targets_are_refused(tmp_path):
    from tapt.recipe import RecipeError, load_recipe

    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({"model": {"name": "m"}, "data": {"path": "d"},
                                    "output_dir": "run",
                                    "loss": {"name": "margin_mse", "grade_weight": 1,
                                             "grade_targets": {3: 1e30, 2: 0.5}}}),
                    encoding="utf-8")
    with pytest.raises(RecipeError, match=r"loss.grade_targets: .*\[-1000000, 1000000\]"):
        load_recipe(path)


def test_the_library_refuses_what_the_flags_refuse():
    from robustness.reliability import hard_timeout
    from tapt.data.synth import build
    from tapt.retrieval.bm25 import BM25Retriever
    from tapt.retrieval.hybrid import reciprocal_rank_fusion

    for call, name in ((lambda: BM25Retriever(k1=1e100), "k1"),
                       (lambda: reciprocal_rank_fusion([], k=1e300), "k (the RRF constant)"),
                       (lambda: build(queries=10**12), "queries")):
        with pytest.raises(ValueError) as caught, hard_timeout(20):  # build used to run on
            call()
        assert str(caught.value).startswith(f"{name} must be in ["), str(caught.value)


# --- the table: every numeric flag and recipe key has a bounded range -----------------------

def numeric_flags():
    """(command words, flag, type) of every option whose type carries a bound."""
    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    yield from walk(child, (*path, name))
            elif action.option_strings and action.type not in (None, Path) \
                    and not isinstance(action.type, type):
                yield path, action.option_strings[0], action.type

    yield from walk(build_parser(), ())


@mark(AREA_BOUNDS, "every numeric flag of every command", "a number with no upper end "
      "(--k1 1e100, --top-k 10**9, --queries 10**12)", "every flag's type carries a "
      "tapt.util.bounds range with an upper end, and its help shows it")
def test_every_numeric_flag_has_a_bounded_documented_range():
    seen = 0
    for path, flag, kind in numeric_flags():
        bound = getattr(kind, "bound", None)
        assert isinstance(bound, Bound), f"tapt {' '.join(path)} {flag}: no tapt.util.bounds range"
        assert bound.high is not None, f"tapt {' '.join(path)} {flag}: {bound.description}"
        seen += 1
    assert seen >= 60
    parser = build_parser()
    bm25 = next(a.choices["bm25"] for a in parser._actions
                if isinstance(a, argparse._SubParsersAction))
    assert "[range: in [0, 1000]]" in " ".join(bm25.format_help().split())


def annotated_bounds(annotation) -> list[Bound]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return [a for a in args[1:] if isinstance(a, Bound)] + annotated_bounds(args[0])
    return [b for arg in args for b in annotated_bounds(arg)]


def numeric_fields(model, prefix=""):
    from tapt.recipe import Section, annotation_types

    for name, info in model.model_fields.items():
        sections = [t for t in annotation_types(info.annotation)
                    if isinstance(t, type) and issubclass(t, Section)]
        if sections:
            yield from numeric_fields(sections[0], f"{prefix}{name}.")
            continue
        types = annotation_types(info.annotation)
        dict_values = typing.get_origin(info.annotation) is dict
        if (types & {int, float} and bool not in types) or dict_values:
            yield f"{prefix}{name}", info


@mark(AREA_BOUNDS, "every numeric recipe key (TAPT and DAPT)", "a number with no upper end "
      "(loss.scale 1e39, training.learning_rate 1e10, teacher targets 1e30)",
      "every key's annotation carries a tapt.util.bounds range with an upper end; tapt recipe "
      "schema shows it")
@pytest.mark.parametrize("kind", ["tapt", "dapt"])
def test_every_numeric_recipe_key_has_a_bounded_documented_range(kind):
    from tapt.recipe import DaptRecipe, Recipe, describe_schema

    schema = DaptRecipe if kind == "dapt" else Recipe
    rows = {row.key: row for row in describe_schema(kind)}
    keys = list(numeric_fields(schema))
    assert {"loss.scale", "training.learning_rate", "eval.top_k"} <= {k for k, _ in keys} \
        if kind == "tapt" else {"objective.scale", "chunking.max_length"} <= {k for k, _ in keys}
    for key, info in keys:
        found = [*[m for m in info.metadata if isinstance(m, Bound)],
                 *annotated_bounds(info.annotation)]
        assert found and all(b.high is not None for b in found), key
        assert found[0].description.replace(" (a whole number)", "") in rows[key].type, \
            (key, rows[key].type)


def test_the_table_says_why_where_a_dtype_or_memory_ends_the_range():
    for bound in (bounds.BM25_K1, bounds.LOGIT_SCALE, bounds.TRAINING_TARGET, bounds.RRF_K,
                  bounds.RESAMPLES, bounds.SYNTH_QUERIES, bounds.TOP_K):
        assert bound.why, bound
        with pytest.raises(ValueError, match="must be") as caught:
            bound.check(bound.high * 10 + 10, "x")
        assert bound.why in str(caught.value)
