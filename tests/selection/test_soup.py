"""Model soups (tapt soup, tapt.selection.soup): greedy never below its best ingredient."""

from __future__ import annotations

import pytest

from tapt.cli import main
from tapt.recipe import load_recipe
from tapt.selection.soup import dev_settings, read_ingredient, soup
from tapt.training.contrastive import train
from tapt.training.weights import MergeError


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_bert_path, tiny_beir_path):
    """Three finished tiny runs of one base model and dev set: seeds and learning rates
    differ, so their weights (and dev metrics) do."""
    import yaml

    root = tmp_path_factory.mktemp("soup-runs")
    folders = []
    for seed, lr in ((0, 1e-3), (1, 3e-3), (2, 3e-2)):
        recipe = {"model": {"name": str(tiny_bert_path)},
                  "data": {"path": str(tiny_beir_path), "dev_distractors": 10},
                  "training": {"max_steps": 3, "eval_steps": 1, "per_device_batch_size": 3,
                               "seed": seed, "learning_rate": lr, "bf16": False},
                  "eval": {"batch_size": 8}, "output_dir": str(root / f"run{seed}")}
        path = root / f"run{seed}.yaml"
        path.write_text(yaml.safe_dump(recipe))
        folders.append(train(load_recipe(path)).run_dir)
    return folders


def dev_of(model_path, settings):
    from tapt.selection.merge import dev_metrics, load_sources

    (model,), _ = load_sources([str(model_path)])
    return dev_metrics(model, settings, str(model_path))[0]


def test_greedy_soup_never_scores_below_its_best_ingredient(runs, tmp_path):
    ingredients = [read_ingredient(run) for run in runs]
    settings = dev_settings(ingredients[0].recipe)
    metric = settings.metric
    best_recorded = max(ingredients, key=lambda i: i.recorded_dev[metric])
    result = soup(runs, tmp_path / "soup", method="greedy")
    assert result.steps[0].ingredient == str(best_recorded.run)
    assert result.dev[metric] >= dev_of(best_recorded.model, settings)[metric] - 1e-9
    best = result.steps[0].dev[metric]
    for step in result.steps[1:]:  # kept exactly when the soup with it did not drop
        assert step.kept == (step.dev[metric] >= best - 1e-9)
        best = max(best, step.dev[metric]) if step.kept else best
    # the export is the soup that was measured
    assert dev_of(tmp_path / "soup", settings)[metric] == pytest.approx(result.dev[metric])
    assert sum(result.weights) == pytest.approx(1.0)
    card = (tmp_path / "soup" / "README.md").read_text()
    assert "greedy soup" in card and "| kept |" in card


def test_uniform_soup_is_the_mean_of_the_ingredients(runs, tmp_path):
    from safetensors.torch import load_file

    result = soup(runs, tmp_path / "uniform", method="uniform")
    assert result.weights == pytest.approx([1 / 3] * 3)
    sources = [load_file(run / "final" / "model.safetensors") for run in runs]
    souped = load_file(tmp_path / "uniform" / "model.safetensors")
    for key, tensor in souped.items():
        if tensor.is_floating_point():
            expected = sum(s[key].double() for s in sources) / 3
            assert (tensor.double() - expected).abs().max() < 1e-6, key


def test_ingredients_on_another_dev_set_are_refused(runs, tmp_path):
    import shutil

    import yaml

    other = tmp_path / "other"
    shutil.copytree(runs[1], other)
    recipe = yaml.safe_load((other / "recipe.yaml").read_text())
    recipe["data"]["dev_distractors"] = 3
    (other / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    with pytest.raises(MergeError, match="data.dev_distractors differs"):
        soup([runs[0], other], tmp_path / "soup")
    assert not (tmp_path / "soup").exists()


def test_cli_soup_of_the_top_runs(runs, tmp_path, capsys):
    assert main(["soup", *map(str, runs), "--top", "2", "--method", "uniform",
                 "--output", str(tmp_path / "cli")]) == 0
    shown = capsys.readouterr().out
    assert "uniform soup of 2 of 2 runs" in shown
    assert main(["soup", str(runs[0]), "--output", str(tmp_path / "one")]) == 2


def test_merge_picks_on_a_run_folders_own_dev_set(runs, tmp_path, tiny_bert_path):
    import json

    settings = dev_settings(read_ingredient(runs[0]).recipe)
    assert main(["merge", str(runs[0] / "final"), str(tiny_bert_path), "--output",
                 str(tmp_path / "wise"), "--pick-on-dev", str(runs[0]), "--grid", "1",
                 "0.5", "--quiet"]) == 0
    picked = json.loads((tmp_path / "wise" / "merge.json").read_text())["pick_on_dev"]
    assert picked["corpus_size"] == len(settings.corpus_ids)
    at_one = next(p for p in picked["grid"] if p["weights"] == [1.0, 0.0])
    assert at_one["binary_ndcg@10"] == pytest.approx(
        dev_of(runs[0] / "final", settings)["binary_ndcg@10"])


def test_sweep_soup_cooks_the_best_trials_and_compares_on_test(make_recipe, tiny_beir_path,
                                                               tmp_path, capsys):
    import json

    recipe_file, _ = make_recipe(
        "swept", data_path=tiny_beir_path, data={"dev_distractors": 10},
        training={"max_steps": 2, "eval_steps": 1, "per_device_batch_size": 3, "bf16": False})
    folder = tmp_path / "sweep"
    assert main(["sweep", str(recipe_file), "training.learning_rate=1e-3,3e-3,3e-2",
                 "--output", str(folder), "--test", "--soup", "2"]) == 0
    shown = capsys.readouterr().out
    assert "greedy soup of" in shown and "of the 2 best trials" in shown
    record = json.loads((folder / "soup" / "merge.json").read_text())["soup"]
    trials = json.loads((folder / "sweep.json").read_text())["trials"]
    best_two = sorted(trials, key=lambda t: -t["dev"]["binary_ndcg@10"])[:2]
    assert {t["folder"] for t in best_two} >= set(record["ingredients"])
    assert (folder / "soup-test.json").is_file()
    assert "Δ" in shown and "best trial" in shown  # the paired test against the best trial


def test_a_sweep_given_to_soup_yields_only_its_own_finished_trials(tmp_path):
    """``tapt soup SWEEP`` takes ``SWEEP/NAME`` of each finished trial, whatever path
    ``sweep.json`` records (a moved sweep, or an edited path outside it), and refuses a
    trial record that names no folder inside the sweep."""
    import json

    from tapt.cli.selection import expand_runs

    sweep = tmp_path / "moved-sweep"
    sweep.mkdir()
    outside = tmp_path / "someone-elses-run"
    trials = [{"name": "lr=1e-4", "status": "finished", "folder": str(outside)},
              {"name": "lr=1e-3", "status": "failed", "folder": "old/lr=1e-3"},
              {"name": "lr=3e-3", "status": "finished", "folder": "old/place/lr=3e-3"}]
    state = sweep / "sweep.json"
    state.write_text(json.dumps({"trials": trials}), encoding="utf-8")
    assert expand_runs([sweep, tmp_path / "plain-run"]) == [
        sweep / "lr=1e-4", sweep / "lr=3e-3", tmp_path / "plain-run"]
    for bad, says in (([*trials, {"name": "../escape", "status": "finished"}], "trial 4"),
                      ([*trials, "lr=5e-3"], "trial 4: field 'name'"),
                      ({"lr": trials}, "field 'trials'")):
        state.write_text(json.dumps({"trials": bad}), encoding="utf-8")
        with pytest.raises(MergeError, match="sweep.json") as caught:
            expand_runs([sweep])
        assert says in str(caught.value)


@pytest.mark.parametrize(("summary", "says"), [
    ({"best dev": {"binary_ndcg@10": float("nan")}}, "field 'summary.best dev.binary_ndcg@10'"),
    ({"best dev": {"binary_ndcg@10": True}}, "field 'summary.best dev.binary_ndcg@10'"),
    ({"best dev": {"binary_ndcg@10": 3.0}}, "field 'summary.best dev.binary_ndcg@10'"),
    ({"best dev": {"mrr@10": 0.5}}, "no 'best dev' binary_ndcg@10"),
    ([1], "no 'best dev' binary_ndcg@10"),
])
def test_an_ingredient_with_an_edited_dev_record_is_refused(runs, tmp_path, summary, says):
    """The recorded dev metric ranks ingredients (``--top``) and orders a greedy soup, so a
    NaN, a bool or a value outside [0, 1] is refused naming the field."""
    import json
    import shutil

    run = shutil.copytree(runs[0], tmp_path / "run")
    results = run / "results.json"
    record = json.loads(results.read_text(encoding="utf-8"))
    results.write_text(json.dumps(record | {"summary": summary}), encoding="utf-8")
    with pytest.raises(MergeError, match="results.json") as caught:
        read_ingredient(run)
    assert says in str(caught.value)


def test_one_run_given_twice_under_another_name_is_refused(runs, tmp_path):
    """Runs are compared by what they are: two spellings of one folder, a symlink to it,
    and a copy of it (identical weights) each count one model twice."""
    import shutil

    link = tmp_path / "link"
    link.symlink_to(runs[0], target_is_directory=True)
    spelled = runs[0].parent / "." / runs[0].name
    for twin in (spelled, link):
        with pytest.raises(MergeError, match="are one run"):
            soup([runs[0], runs[1], twin], tmp_path / "soup")
    copy = tmp_path / "copy"
    shutil.copytree(runs[0], copy)
    with pytest.raises(MergeError, match="copies of one run"):
        soup([runs[0], copy], tmp_path / "soup")
    assert not (tmp_path / "soup").exists()
