"""``eval.guard_data``: a second BEIR set evaluated at every checkpoint beside dev, and the
guard criterion of ``tapt merge --pick-on-dev``."""

from __future__ import annotations

import json

import pytest

from tapt.analysis.report import build_report, write_report
from tapt.cli import main
from tapt.recipe import DaptRecipe, RecipeError, load_recipe
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.selection.merge import best_weight
from tapt.selection.merge_types import GridPoint
from tapt.training.contrastive import train
from tapt.training.weights import MergeError

GUARD = {"max_steps": 4, "eval_steps": 2, "save_total_limit": 3}


def test_guard_metrics_at_each_evaluation_equal_tapt_eval(make_recipe, tiny_beir_path,
                                                          tmp_path):
    recipe_file, output = make_recipe("guarded", training=GUARD,
                                      eval={"batch_size": 8, "guard_data": str(tiny_beir_path)})
    recipe = load_recipe(recipe_file)
    train(recipe)
    history = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    assert [entry["step"] for entry in history] == [0, 2, 4]
    assert all(isinstance(entry[f"guard_{key}"], float) for entry in history
               for key in METRIC_KEYS)
    # the trainer logs them as eval_guard_<metric>
    state = json.loads((output / "checkpoints" / "checkpoint-4" / "trainer_state.json")
                       .read_text())
    logged = [entry for entry in state["log_history"] if "eval_guard_binary_ndcg@10" in entry]
    assert [entry["step"] for entry in logged] == [0, 2, 4]

    for step in (2, 4):
        out = tmp_path / f"guard-{step}.json"
        assert main(["eval", "--model", str(output / "checkpoints" / f"checkpoint-{step}"),
                     "--data", str(tiny_beir_path), "--split", "test", "--batch-size", "8",
                     "--output", str(out), "--quiet"]) == 0
        single = json.loads(out.read_text())
        entry = next(e for e in history if e["step"] == step)
        for key in METRIC_KEYS:
            assert single[key] == pytest.approx(entry[f"guard_{key}"], abs=1e-6), (step, key)

    results = json.loads((output / "results.json").read_text())
    assert {"zero-shot guard", "best guard"} <= set(results["summary"])
    card = (output / "final" / "README.md").read_text()
    assert "guard binary_ndcg@10" in card
    markdown, curve, _ = write_report(build_report(output, bm25=None), tmp_path / "report.md")
    text = markdown.read_text()
    assert "guard binary_ndcg@10" in text and "best guard" in text and curve.is_file()


def test_guard_leaves_the_dev_primary_metric_alone(tiny_bert_path, tiny_beir_path):
    """The guard's metrics join the returned dict without renaming the dev evaluator's
    ``primary_metric`` (sentence-transformers' prefix_name_to_metrics would, at every call)."""
    from sentence_transformers import SentenceTransformer

    import tapt
    from tapt.retrieval.in_loop import RetrievalEvaluator

    dataset = tapt.load_data(tiny_beir_path)
    guard = RetrievalEvaluator(dataset, "test", list(dataset.corpus), name="guard",
                               batch_size=8, dtype="float32")
    dev = RetrievalEvaluator(dataset, "test", list(dataset.corpus), batch_size=8,
                             dtype="float32", guard_evaluator=guard)
    model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    for step in (0, 1):
        metrics = dev(model, steps=step)
        assert dev.primary_metric == "dev_binary_ndcg@10"
        assert metrics["guard_binary_ndcg@10"] == pytest.approx(metrics["dev_binary_ndcg@10"])
    assert guard.primary_metric == "binary_ndcg@10"


def test_missing_guard_folder_is_refused_naming_the_key(make_recipe, tmp_path):
    recipe_file, _ = make_recipe("nofolder", eval={"guard_data": str(tmp_path / "absent")})
    with pytest.raises(RecipeError, match=r"eval.guard_data.*no such folder"):
        load_recipe(recipe_file)
    # a bare name (maybe a Hub id) is checked when the run starts, before anything is written
    recipe_file, output = make_recipe("bare", eval={"guard_data": "absent-guard-folder"})
    with pytest.raises(RecipeError, match=r"eval.guard_data absent-guard-folder"):
        train(load_recipe(recipe_file))
    assert not output.exists()


def test_guard_keys_without_guard_data_are_refused_naming_the_key(make_recipe):
    recipe_file, _ = make_recipe("noguard", eval={"guard_split": "dev", "guard_lenient": True})
    with pytest.raises(RecipeError, match=r"eval.guard_lenient is set but eval.guard_data"):
        load_recipe(recipe_file)
    # defaults pass: a run folder's recipe.yaml records every key
    recipe_file, _ = make_recipe("defaults", eval={"guard_split": "test",
                                                   "guard_relevant_from": "auto"})
    assert load_recipe(recipe_file).eval.guard_data is None


def test_guard_split_without_queries_is_refused(make_recipe, tiny_beir_path):
    recipe_file, _ = make_recipe("nosplit", eval={"guard_data": str(tiny_beir_path),
                                                  "guard_split": "other"})
    with pytest.raises(RecipeError, match=r"eval.guard_data"):
        train(load_recipe(recipe_file))


def test_dapt_recipes_refuse_the_tapt_only_keys(tiny_bert_path, tiny_beir_path, tmp_path):
    base = {"model": {"name": str(tiny_bert_path)}, "data": {"path": str(tiny_beir_path)},
            "objective": {"name": "mlm"}, "output_dir": str(tmp_path / "dapt")}
    for section, values, key in [("eval", {"guard_data": str(tiny_beir_path)}, "eval.guard_data"),
                                 ("training", {"average_last": 2}, "training.average_last"),
                                 ("eval", {"require_beats_zero_shot": True},
                                  "eval.require_beats_zero_shot")]:
        with pytest.raises(ValueError, match=key):
            DaptRecipe.model_validate({**base, section: values})


def points(rows):
    return [GridPoint(weight, {"binary_ndcg@10": dev}, guard={"binary_ndcg@10": guard})
            for weight, dev, guard in rows]


def test_a_guard_criterion_changes_the_pick():
    # dev prefers the fine-tuned model alone (w = 1), but it lost 0.10 of guard against
    # the base (w = 0); w = 0.5 keeps the guard within 0.02 and is the best dev of those
    grid = points([(0.0, 0.40, 0.50), (0.5, 0.55, 0.49), (0.75, 0.58, 0.46), (1.0, 0.60, 0.40)])
    assert best_weight(grid, "binary_ndcg@10") == 1.0
    assert best_weight(grid, "binary_ndcg@10", guard_tolerance=0.02) == 0.5
    assert best_weight(grid, "binary_ndcg@10", guard_tolerance=0.05) == 0.75
    assert best_weight(grid, "binary_ndcg@10", guard_tolerance=0.0) == 0.0
    with pytest.raises(MergeError, match="w = 0"):
        best_weight(grid[1:], "binary_ndcg@10", guard_tolerance=0.02)


def test_merge_pick_with_a_guard_shows_both_and_keeps_the_constraint(
        tmp_path, tiny_bert_path, tiny_beir_path, synth_path, make_recipe, capsys):
    recipe_file, output = make_recipe("tuned", training={"max_steps": 2, "eval_steps": 2})
    train(load_recipe(recipe_file))
    out = tmp_path / "merged"
    code = main(["merge", str(output / "final"), str(tiny_bert_path), "--output", str(out),
                 "--pick-on-dev", str(synth_path), "--grid", "0.5", "1",
                 "--guard-data", str(tiny_beir_path), "--guard-tolerance", "0", "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "guard binary_ndcg@10" in printed
    record = json.loads((out / "merge.json").read_text())["pick_on_dev"]
    assert record["guard_data"] == tiny_beir_path.name and record["guard_tolerance"] == 0
    grid = {g["weights"][0]: g for g in record["grid"]}
    assert set(grid) == {0.5, 1.0, 0.0}  # w = 0 added as the guard's reference
    floor = grid[0.0]["guard"]["binary_ndcg@10"] - 1e-9
    picked = grid[record["picked_weight"]]
    assert picked["guard"]["binary_ndcg@10"] >= floor
    eligible = [g for g in grid.values() if g["guard"]["binary_ndcg@10"] >= floor]
    assert picked["binary_ndcg@10"] == max(g["binary_ndcg@10"] for g in eligible)
    assert "guard binary_ndcg@10" in (out / "README.md").read_text()


def test_guard_data_needs_pick_on_dev(tmp_path, tiny_bert_path, tiny_beir_path, capsys):
    code = main(["merge", str(tiny_bert_path), str(tiny_bert_path), "--output",
                 str(tmp_path / "m"), "--guard-data", str(tiny_beir_path)])
    assert code == 2
    printed = capsys.readouterr()
    assert "error: --guard-data needs --pick-on-dev" in printed.out + printed.err


@pytest.mark.parametrize("flags", [["--guard-split", "test"], ["--guard-tolerance", "0"],
                                   ["--guard-lenient"], ["--guard-relevant-from", "auto"]])
def test_guard_flags_without_guard_data_are_refused(tmp_path, tiny_bert_path, synth_path,
                                                    flags, capsys):
    """Even at their default values: given without --guard-data they would do nothing."""
    out = tmp_path / "m"
    code = main(["merge", str(tiny_bert_path), str(tiny_bert_path), "--output", str(out),
                 "--pick-on-dev", str(synth_path), *flags])
    assert code == 2
    printed = capsys.readouterr()
    assert f"error: {flags[0]} needs --guard-data" in printed.out + printed.err
    assert not out.exists()


@pytest.mark.slow
def test_guard_and_average_last_under_two_processes(make_recipe, tiny_beir_path, tmp_path):
    """Under torchrun (2 CPU ranks, gloo) the guard set is evaluated with both ranks encoding
    (rank 0 writes the line), equal to a single-process ``tapt eval``; ``average_last``
    averages on every rank and rank 0 exports the mean."""
    from test_average_last import assert_mean_of
    from two_ranks import torchrun_two

    recipe_file, output = make_recipe(
        "ddp-guard", training={**GUARD, "per_device_batch_size": 4, "average_last": 2},
        eval={"batch_size": 4, "guard_data": str(tiny_beir_path)})
    done = torchrun_two(["-m", "tapt", "train", str(recipe_file)], 29547)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    history = {e["step"]: e for e in map(json.loads, (output / "metrics.jsonl").read_text()
                                           .splitlines())}
    assert sorted(history) == [0, 2, 4]
    out = tmp_path / "single.json"
    assert main(["eval", "--model", str(output / "checkpoints" / "checkpoint-4"), "--data",
                 str(tiny_beir_path), "--split", "test", "--batch-size", "4", "--output",
                 str(out), "--quiet"]) == 0
    single = json.loads(out.read_text())
    for key in METRIC_KEYS:
        assert single[key] == pytest.approx(history[4][f"guard_{key}"], abs=1e-6), key
    assert_mean_of(output / "final", [output / "checkpoints" / f"checkpoint-{s}" for s in (2, 4)])


@pytest.mark.parametrize(("rows", "heading", "absent"), [
    (["best guard"], "Guard set (`eval.guard_data`):", "averaged"),
    (["averaged dev"], "Averaged weights (`averaged`:", "Guard set"),
    (["best guard", "averaged dev", "averaged guard"],
     "Guard set (`eval.guard_data`) and averaged weights", None),
])
def test_the_report_heading_names_what_the_run_has(tmp_path, rows, heading, absent):
    from tapt.analysis.report import RunReport, render_markdown

    metrics = dict.fromkeys(METRIC_KEYS, 0.5)
    report = RunReport(run_dir=tmp_path, recipe={}, status="finished", history=[],
                       best_step=None, summary={row: metrics for row in rows},
                       metric="binary_ndcg@10")
    markdown = render_markdown(report, tmp_path)
    line = next(line for line in markdown.splitlines() if line.startswith(heading))
    assert absent is None or absent not in line
