"""Hostile result files read by other commands: ``tapt compare`` (``tapt eval/bm25 --output``
files), ``tapt report --bm25 RESULT.json`` and the run folder ``tapt report`` reads
(``recipe.yaml``, ``metrics.jsonl``, ``results.json``). A refused input leaves none of the
command's outputs behind."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from robustness.hostile import VALID, deep_json, document_variants, huge_int

pytest.importorskip("tapt.analysis.compare")

from tapt.analysis.bm25_reference import bm25_from_file
from tapt.analysis.compare import compare_results
from tapt.analysis.report import load_run

RESULT = {"binary_ndcg@10": 0.5, "graded_ndcg@10": 0.45, "mrr@10": 0.4, "recall@100": 0.9,
          "timings": {"search_ms_per_query": 0.25, "query_encode_ms_per_query": 1.5},
          "evaluated": {"model": "bm25", "data": "data/formbench-structured", "split": "test",
                        "corpus_size": 120, "note": "é"}}
ACCEPTED = {VALID, "UTF-8 BOM at the start", "CRLF line ends"}


def result_bytes(**changes) -> bytes:
    return json.dumps({**RESULT, **changes}, indent=2, ensure_ascii=False).encode("utf-8")


def compare_cli(case, path, tmp_path, capsys, **kwargs):
    out = tmp_path / "out"
    outputs = [out / "compare.json", out / "compare.png", out / "compare.md"]
    return case.cli(["compare", str(path), "--output", str(outputs[0]), "--markdown",
                     str(outputs[2])], capsys, watch=[tmp_path], must_not_exist=outputs,
                    **kwargs)


@pytest.mark.parametrize("variant", list(document_variants(b"x" * 20)))
def test_result_file_encoding_and_framing(variant, tmp_path, reliability_case, quiet_cli,
                                          capsys):
    path = tmp_path / "result.json"
    path.write_bytes(document_variants(result_bytes())[variant])
    expected = "accepted" if variant in ACCEPTED else "refused"
    case = reliability_case("result file (tapt compare)", variant, expected=expected)
    api = case.api(compare_results, [str(path)])
    report = case.api(bm25_from_file, path, via="API bm25_from_file (tapt report --bm25)")
    if expected == "accepted":
        api.assert_accepted()
        report.assert_accepted()
        case.cli(["compare", str(path)], capsys).assert_accepted()
        return
    api.assert_refused(path)
    report.assert_refused(path)
    compare_cli(case, path, tmp_path, capsys).assert_refused(path)


def raw(text: str) -> bytes:
    return text.encode("utf-8")


CONTENT = [
    ("binary_ndcg@10 NaN", raw('{"binary_ndcg@10": NaN, "graded_ndcg@10": 0.4, "mrr@10": 0.4, '
                               '"recall@100": 0.9, "evaluated": {"model": "bm25"}}'),
     "refused", "binary_ndcg@10"),
    ("mrr@10 Infinity", raw('{"binary_ndcg@10": 0.5, "graded_ndcg@10": 0.4, "mrr@10": Infinity,'
                            ' "recall@100": 0.9, "evaluated": {"model": "bm25"}}'),
     "refused", "mrr@10"),
    ("recall@100 negative", result_bytes(**{"recall@100": -0.1}), "refused", "recall@100"),
    ("graded_ndcg@10 above 1", result_bytes(**{"graded_ndcg@10": 1.5}), "refused",
     "graded_ndcg@10"),
    ("a metric as a string", result_bytes(**{"mrr@10": "0.4"}), "refused", "mrr@10"),
    ("a metric as a boolean", result_bytes(**{"mrr@10": True}), "refused", "mrr@10"),
    ("a metric missing", json.dumps({k: v for k, v in RESULT.items()
                                     if k != "recall@100"}).encode(), "refused", "recall@100"),
    ("no evaluated block", json.dumps({k: v for k, v in RESULT.items()
                                       if k != "evaluated"}).encode(), "refused", None),
    ("evaluated is a list", result_bytes(evaluated=["bm25"]), "refused", None),
    ("timings is a list", result_bytes(timings=[1, 2]), "refused", "timings"),
    ("a timing NaN (latency unknown)", raw(result_bytes().decode().replace(
        '"search_ms_per_query": 0.25', '"search_ms_per_query": NaN')), "accepted", None),
    ("evaluated.model is an object", result_bytes(evaluated={"model": {"a": 1}}), "accepted",
     None),
    ("top level is a list", b"[1, 2, 3]", "refused", None),
    ("a value nested 100,000 deep", raw('{"x": ') + deep_json() + b"}", "refused", None),
    ("a 5,000-digit integer", raw('{"x": ') + huge_int() + b"}", "refused", None),
]


@pytest.mark.parametrize("name,data,expected,field", CONTENT, ids=[c[0] for c in CONTENT])
def test_result_file_content(name, data, expected, field, tmp_path, reliability_case,
                             quiet_cli, capsys):
    path = tmp_path / "result.json"
    path.write_bytes(data)
    case = reliability_case("result file (tapt compare)", name, expected=expected)
    api = case.api(compare_results, [str(path)])
    if expected == "accepted":
        api.assert_accepted()
        return
    api.assert_refused(path, field=field)
    compare_cli(case, path, tmp_path, capsys).assert_refused(path, field=field)


def _loop(path):
    os.symlink(path, path)


FILESYSTEM = [
    ("result file missing", lambda p: None),
    ("result file is a folder", lambda p: p.mkdir()),
    ("result file is a symlink loop", _loop),
    ("result file is a FIFO (named pipe, nobody writing)", lambda p: os.mkfifo(p)),
]


@pytest.mark.parametrize("name,make", FILESYSTEM, ids=[c[0] for c in FILESYSTEM])
def test_result_file_filesystem(name, make, tmp_path, reliability_case, quiet_cli, capsys):
    path = tmp_path / "result.json"
    make(path)
    case = reliability_case("result file (tapt compare)", name)
    case.api(compare_results, [str(path)], timeout=10).assert_refused(path)
    compare_cli(case, path, tmp_path, capsys, timeout=10).assert_refused(path)


# --------------------------------------------------------------------------- tapt report

HISTORY = [{"step": s, "epoch": s / 10, "binary_ndcg@10": v, "graded_ndcg@10": v,
            "mrr@10": v, "recall@100": 1.0} for s, v in ((0, 0.3), (5, 0.5), (10, 0.6))]


def make_run(folder):
    folder.mkdir(parents=True)
    recipe = {"model": {"name": "tiny"}, "data": {"path": "nowhere", "dev_split": "dev"},
              "eval": {"metric": "binary_ndcg@10"}, "output_dir": str(folder)}
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    (folder / "metrics.jsonl").write_text("".join(json.dumps(h) + "\n" for h in HISTORY),
                                          encoding="utf-8")
    (folder / "results.json").write_text(json.dumps({"status": "finished", "best_step": 10,
                                                     "summary": {}}), encoding="utf-8")
    return folder


def _cut_middle_line(run):
    path = run / "metrics.jsonl"
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:20]
    path.write_text("\n".join(lines) + "\n")
    return path, None


def _metrics_no_step(run):
    path = run / "metrics.jsonl"
    path.write_text(json.dumps({"epoch": 0.1, "binary_ndcg@10": 0.1}) + "\n")
    return path, None


def _results_truncated(run):
    path = run / "results.json"
    path.write_bytes(path.read_bytes()[:15])
    return path, None


def _results_list(run):
    path = run / "results.json"
    path.write_text("[]")
    return path, None


def _recipe_utf16(run):
    path = run / "recipe.yaml"
    path.write_bytes(path.read_text().encode("utf-16"))
    return path, None


def _metric_nan(run):
    path = run / "metrics.jsonl"
    lines = path.read_text().splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), "mrr@10": float("nan")})
    path.write_text("\n".join(lines) + "\n")
    return path, 2


def _results_edited(change):
    def damage(run):
        path = run / "results.json"
        record = json.loads(path.read_text())
        path.write_text(json.dumps(record | change))
        return path, None
    return damage


def _unknown_metric(run):
    path = run / "recipe.yaml"
    recipe = yaml.safe_load(path.read_text())
    recipe["eval"]["metric"] = "ndcg@1000"
    path.write_text(yaml.safe_dump(recipe))
    return path, None


SUMMARY = {"best dev": {"binary_ndcg@10": 0.6, "graded_ndcg@10": 0.6, "mrr@10": 0.6,
                        "recall@100": 7.0}}

RUN_FOLDER = [
    ("metrics.jsonl: a line cut in the middle of the file", _cut_middle_line),
    ("metrics.jsonl: a NaN metric", _metric_nan),
    ("results.json: a summary metric of 7.0", _results_edited({"summary": SUMMARY})),
    ("results.json: a summary that is a list", _results_edited({"summary": []})),
    ("results.json: best_step -1", _results_edited({"best_step": -1})),
    ("recipe.yaml: eval.metric no metric of tapt's", _unknown_metric),
    ("metrics.jsonl: an entry without a step", _metrics_no_step),
    ("results.json: truncated", _results_truncated),
    ("results.json: a list instead of an object", _results_list),
    ("recipe.yaml: UTF-16", _recipe_utf16),
]


def test_report_skips_a_cut_last_line(tmp_path, reliability_case, quiet_cli, capsys):
    """A crash while appending to metrics.jsonl leaves a cut last line: skipped (with a
    warning), the rest of the run is reported."""
    run = make_run(tmp_path / "run")
    path = run / "metrics.jsonl"
    path.write_bytes(path.read_bytes()[:-20])
    case = reliability_case("run folder (tapt report)", "metrics.jsonl: last line cut (a crash "
                            "while appending), skipped with a warning", expected="accepted")
    case.api(load_run, run, via="API load_run").assert_accepted()
    assert [e["step"] for e in load_run(run).history] == [0, 5]


@pytest.mark.parametrize("name,damage", RUN_FOLDER, ids=[c[0] for c in RUN_FOLDER])
def test_report_run_folder(name, damage, tmp_path, reliability_case, quiet_cli, capsys):
    run = make_run(tmp_path / "run")
    path, line = damage(run)
    out = tmp_path / "out" / "report.md"
    case = reliability_case("run folder (tapt report)", name)
    case.api(load_run, run, via="API load_run").assert_refused(path, line)
    case.cli(["report", str(run), "--no-bm25", "--output", str(out)], capsys,
             watch=[tmp_path], must_not_exist=[out.parent]).assert_refused(path, line)
