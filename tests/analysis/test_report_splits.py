"""``tapt report RUN_DIR`` states the run's splits: the test result's seen and novel queries
with the metrics on each part (``test.json``'s ``train_overlap``), how dev was carved
(``dev_carve``), what train was decontaminated against (``decontaminated``), and a run
that does not beat its base model on dev; a run without these records states none of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tapt.analysis.report import build_report, history_table, render_markdown
from tapt.cli import main
from tapt.retrieval.metrics import METRIC_KEYS


def metrics(value: float) -> dict[str, float]:
    return dict.fromkeys(METRIC_KEYS, value)


CARVE = {"carved_from": "train", "split": "dev", "seed": 0, "queries": 100,
         "remaining_train_queries": 709, "ids_digest": "ab" * 16, "by": "group", "groups": 57,
         "overlap": 0}
DECONTAMINATED = {"against": ["test"], "train_split": "train", "train_queries": [809, 550],
                  "judgments": [920, 600], "passages": 340}
OVERLAP = {"split": "test", "train_split": "train", "decontaminated": [], "seen": 3,
           "novel": 2, "seen_query_ids": ["q1", "q2", "q3"],
           "metrics": {"seen": metrics(0.8125), "novel": {"binary_ndcg@10": 0.3125}},
           "counts": {"seen": dict.fromkeys(METRIC_KEYS, 3),
                      "novel": {"binary_ndcg@10": 2}}}


def make_run(root: Path, *, best: float = 0.61, **records) -> Path:
    """A finished run folder (zero-shot dev 0.5, best step 10 at ``best``) with
    ``records`` in results.json (``train_overlap`` goes to test.json)."""
    run = root / "runs" / "tiny"
    run.mkdir(parents=True)
    recipe = {"model": {"name": "tiny-model"}, "loss": {"name": "mnrl"},
              "training": {"epochs": 1}, "eval": {"metric": "binary_ndcg@10"},
              "data": {"path": "nowhere", "dev_split": "dev"}, "output_dir": str(run)}
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    history = [{"step": 0, "epoch": 0.0, **metrics(0.5)},
               {"step": 10, "epoch": 1.0, **metrics(best)}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    overlap = records.pop("train_overlap", None)
    summary = {"zero-shot dev": metrics(0.5), "best dev": metrics(best),
               "TAPT test": metrics(0.61)}
    (run / "results.json").write_text(json.dumps({"status": "finished", "summary": summary,
                                                  "best_step": 10, **records}))
    test = {**metrics(0.61), "evaluated": {"model": "final", "split": "test"}}
    if overlap is not None:
        test["train_overlap"] = overlap
    (run / "test.json").write_text(json.dumps(test))
    return run


def test_the_report_states_seen_novel_carve_and_decontamination(tmp_path):
    run = make_run(tmp_path, dev_carve=CARVE, decontaminated=DECONTAMINATED,
                   train_overlap=OVERLAP)
    report = build_report(run, bm25=None)
    markdown = render_markdown(report, run)
    assert ("Of the 5 queries of the test result (`test` split), 3 are **seen** (a relevant "
            "passage is a `train` positive) and 2 **novel**.") in markdown
    assert "binary_ndcg@10 0.8125 on seen queries, binary_ndcg@10 0.3125 on novel queries" \
        in markdown
    assert "| test, seen | 3 | 0.8125 | 0.8125 | 0.8125 | 0.8125 |" in markdown
    assert "| test, novel | 2 | 0.3125 | - | - | - |" in markdown
    assert ("Dev split `dev`: 100 queries carved from `train` in 57 whole groups of queries "
            "that share relevant passages (seed 0); 709 queries left to train on.") in markdown
    assert "No dev query has a relevant passage that is a training positive." in markdown
    assert ("Train decontaminated against `test`: every judgment of a passage relevant there "
            "dropped (920 -> 600 judgments, 809 -> 550 train queries)") in markdown
    assert "does not beat" not in markdown  # best 0.61 > zero-shot 0.5
    data = report.to_dict()
    assert data["train_overlap"] == OVERLAP and data["dev_carve"] == CARVE
    assert data["zero_shot_gate"]["beats_zero_shot"] is True


def test_a_query_carve_says_so_and_a_record_without_by_is_refused(tmp_path):
    carve = {**CARVE, "by": "query", "groups": 100, "overlap": 64}
    markdown = render_markdown(build_report(make_run(tmp_path, dev_carve=carve), bm25=None),
                               tmp_path)
    assert "carved from `train` by single query (seed 0)" in markdown
    assert ("64 of the dev queries have a relevant passage that is a training positive: dev "
            "partly rewards memorising training passages.") in markdown
    for key in ("by", "groups", "overlap"):
        partial = {name: value for name, value in CARVE.items() if name != key}
        run = make_run(tmp_path / f"without-{key}", dev_carve=partial)
        with pytest.raises(ValueError, match=rf"results\.json: field 'dev_carve\.{key}'"):
            build_report(run, bm25=None)


def test_a_run_without_records_states_none(tmp_path):
    report = build_report(make_run(tmp_path), bm25=None)
    markdown = render_markdown(report, tmp_path)
    for absent in ("seen", "carved", "decontaminated", "does not beat"):
        assert absent not in markdown
    assert report.records == {}


def test_a_run_that_does_not_beat_zero_shot_says_so(tmp_path, capsys):
    gate = {"metric": "binary_ndcg@10", "zero_shot": 0.5, "best": 0.5, "best_step": 10,
            "exported": "best", "beats_zero_shot": False}
    run = make_run(tmp_path, best=0.5, zero_shot_gate=gate)
    line = ("**Warning: This model does not beat its base model on dev: the best dev (step "
            "10) binary_ndcg@10 0.5000 is not above the zero-shot 0.5000.**")
    assert line in render_markdown(build_report(run, bm25=None), run)
    assert main(["report", str(run), "--no-bm25"]) == 0
    assert "does not beat its base model on dev" in " ".join(capsys.readouterr().out.split())
    assert line in (run / "report.md").read_text()


def test_an_older_run_gets_its_gate_from_the_history(tmp_path):
    report = build_report(make_run(tmp_path, best=0.45), bm25=None)
    assert report.gate == {"metric": "binary_ndcg@10", "zero_shot": 0.5, "best": 0.45,
                           "best_step": 10, "compared": "best", "exported": "best",
                           "beats_zero_shot": False}
    assert "does not beat its base model on dev" in render_markdown(report, tmp_path)


def test_a_run_still_training_has_no_exported_weights_in_its_gate(tmp_path):
    run = make_run(tmp_path, best=0.55)
    results = json.loads((run / "results.json").read_text())
    (run / "results.json").unlink()  # training writes results.json when it ends
    (run / "test.json").unlink()
    report = build_report(run, bm25=None)
    assert report.status == "unfinished (no results.json)"
    assert report.gate["exported"] is None and report.gate["compared"] == "best"
    assert report.gate["beats_zero_shot"] is True
    (run / "results.json").write_text(json.dumps({**results, "status": "stopped"}))
    assert build_report(run, bm25=None).gate["exported"] is None


def test_the_console_table_has_the_seen_and_novel_rows(tmp_path):
    from rich.console import Console

    report = build_report(make_run(tmp_path, train_overlap=OVERLAP), bm25=None)
    console = Console(width=200, record=True)
    console.print(history_table(report))
    text = console.export_text()
    assert "test, seen (3 queries)" in text and "test, novel (2 queries)" in text


@pytest.mark.parametrize(("key", "record", "field"), [
    ("dev_carve", {**CARVE, "queries": -1}, "dev_carve.queries"),
    ("dev_carve", {**CARVE, "by": "passage"}, "dev_carve.by"),
    ("decontaminated", {**DECONTAMINATED, "judgments": [920]}, "decontaminated.judgments"),
    ("train_overlap", {**OVERLAP, "seen": "3"}, "train_overlap.seen"),
    ("train_overlap", {**OVERLAP, "metrics": {"seen": {"binary_ndcg@10": 1.5}}},
     "train_overlap.metrics.seen.binary_ndcg@10"),
    ("zero_shot_gate", {"metric": "binary_ndcg@10", "zero_shot": 0.5, "best": 0.5,
                        "beats_zero_shot": "no"}, "zero_shot_gate.beats_zero_shot"),
    ("zero_shot_gate", {"metric": "binary_ndcg@10", "zero_shot": 0.5, "best": None,
                        "beats_zero_shot": False}, "zero_shot_gate.beats_zero_shot"),
    ("zero_shot_gate", {"metric": "binary_ndcg@10", "zero_shot": 0.5, "best": 0.4,
                        "beats_zero_shot": True}, "zero_shot_gate.beats_zero_shot"),
    ("zero_shot_gate", {"metric": "binary_ndcg@10", "zero_shot": 0.5, "best": 0.6,
                        "exported": "averaged", "beats_zero_shot": True},
     "zero_shot_gate.beats_zero_shot"),
    ("zero_shot_gate", {"metric": "binary_ndcg@10", "zero_shot": 0.5, "best": 0.6,
                        "exported": "soup", "beats_zero_shot": True}, "zero_shot_gate.exported"),
])
def test_a_malformed_record_is_named(tmp_path, key, record, field):
    run = make_run(tmp_path, **{key: record})
    where = "test.json" if key == "train_overlap" else "results.json"
    with pytest.raises(ValueError, match=rf"{where}: field '{field}'"):
        build_report(run, bm25=None)
