"""``tapt soup`` and ``tapt merge --pick-on-dev RUN`` rebuild a run's dev split from today's
data: a carved dev split must be the one each run recorded (``results.json``'s
``dev_carve``), else dev could hold the runs' training queries; refused before any model
loads (tapt.selection.soup, tapt.selection.merge). No training: the runs are folders with a
recipe, a results record and an empty ``final/``; loading a model fails the test."""

from __future__ import annotations

import json

import pytest
import yaml

from tapt.cli import main
from tapt.recipe import load_recipe
from tapt.selection import merge as merge_module
from tapt.selection import soup as soup_module
from tapt.selection.soup import dev_settings, soup
from tapt.training.weights import MergeError


class ModelsLoaded(Exception):
    """Raised where the models would load: every check before it passed."""


@pytest.fixture
def no_loading(monkeypatch):
    def refuse(*args, **kwargs):
        raise ModelsLoaded
    monkeypatch.setattr(soup_module, "load_sources", refuse)
    monkeypatch.setattr(merge_module, "load_sources", refuse)


@pytest.fixture(scope="module")
def undivided_path(tmp_path_factory):
    """The tiny BEIR set without a dev split (train and test only): dev is carved."""
    import tiny_models

    from tapt.data.beir import write_beir

    corpus, queries, qrels = tiny_models.tiny_beir_parts()
    del qrels["dev"]
    return write_beir(tmp_path_factory.mktemp("data") / "undivided", corpus, queries, qrels)


def fake_run(folder, model, data, *, carve: bool = True, record="today", **data_keys):
    """A finished-looking run folder whose recipe carves ``dev_from_train: 2`` (or reads
    the dev split when not ``carve``); ``record``: the ``dev_carve`` written to
    results.json (``today``: the carve today's data gives; None: no such key)."""
    data_section = {"path": str(data), "dev_distractors": 10, **data_keys}
    if carve:
        data_section["dev_from_train"] = 2
    recipe = {"model": {"name": str(model)}, "data": data_section,
              "training": {"max_steps": 2, "bf16": False}, "output_dir": str(folder)}
    (folder / "final").mkdir(parents=True)
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    if record == "today":
        record = dev_settings(load_recipe(folder / "recipe.yaml")).dataset.carved
    results = {"status": "finished", "summary": {"best dev": {"binary_ndcg@10": 0.5}}}
    if record is not None:
        results["dev_carve"] = record
    (folder / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return folder


def today(run) -> dict:
    return dict(dev_settings(load_recipe(run / "recipe.yaml")).dataset.carved)


def test_runs_whose_recorded_carve_is_todays_reach_the_models(tmp_path, tiny_bert_path,
                                                               undivided_path, no_loading):
    runs = [fake_run(tmp_path / name, tiny_bert_path, undivided_path) for name in "ab"]
    with pytest.raises(ModelsLoaded):
        soup(runs, tmp_path / "soup")


def test_runs_with_a_dev_split_read_from_file_are_unaffected(tmp_path, tiny_bert_path,
                                                             tiny_beir_path, no_loading):
    runs = [fake_run(tmp_path / name, tiny_bert_path, tiny_beir_path, carve=False,
                     record=None) for name in "ab"]
    with pytest.raises(ModelsLoaded):
        soup(runs, tmp_path / "soup")


def test_a_soup_of_runs_recording_another_carve_than_todays_is_refused(
        tmp_path, tiny_bert_path, undivided_path, no_loading):
    first = fake_run(tmp_path / "a", tiny_bert_path, undivided_path)
    other = {**today(first), "ids_digest": "0" * 32}  # the data changed since both ran
    runs = [fake_run(tmp_path / name, tiny_bert_path, undivided_path, record=other)
            for name in "bc"]
    with pytest.raises(MergeError) as caught:
        soup(runs, tmp_path / "soup")
    message = str(caught.value)
    assert str(runs[0] / "results.json") in message
    assert "field 'dev_carve.ids_digest'" in message and "0" * 32 in message
    assert not (tmp_path / "soup").exists()


def test_ingredients_recording_different_carves_are_refused_naming_both(
        tmp_path, tiny_bert_path, undivided_path, no_loading):
    first = fake_run(tmp_path / "a", tiny_bert_path, undivided_path)
    second = fake_run(tmp_path / "b", tiny_bert_path, undivided_path,
                      record={**today(first), "ids_digest": "1" * 32})
    with pytest.raises(MergeError) as caught:
        soup([first, second], tmp_path / "soup")
    message = str(caught.value)
    assert str(first) in message and str(second) in message and "ids_digest" in message


@pytest.mark.parametrize(("carve", "record", "says"), [
    (True, None, "records no dev carve"),
    (True, "without by", "field 'dev_carve.by': expected 'group' or 'query', got None"),
    (True, "by query", "field 'dev_carve.by'"),
    (False, "carved", "reads its dev split"),
])
def test_a_run_whose_carve_record_does_not_match_todays_recipe_is_refused(
        tmp_path, tiny_bert_path, tiny_beir_path, undivided_path, no_loading, carve, record,
        says):
    reference = fake_run(tmp_path / "ref", tiny_bert_path, undivided_path)
    carved = today(reference)
    records = {None: None, "without by": {k: v for k, v in carved.items() if k != "by"},
               "by query": {**carved, "by": "query"}, "carved": carved}
    runs = [fake_run(tmp_path / name, tiny_bert_path,
                     undivided_path if carve else tiny_beir_path, carve=carve,
                     record=records[record]) for name in "ab"]
    with pytest.raises(MergeError) as caught:
        soup(runs, tmp_path / "soup")
    message = str(caught.value)
    assert str(runs[0] / "results.json") in message and says in message, message


def test_merge_pick_on_dev_refuses_a_run_recording_another_carve(
        tmp_path, tiny_bert_path, undivided_path, no_loading, capsys):
    reference = fake_run(tmp_path / "ref", tiny_bert_path, undivided_path)
    run = fake_run(tmp_path / "run", tiny_bert_path, undivided_path,
                   record={**today(reference), "ids_digest": "2" * 32})
    command = ["merge", str(tiny_bert_path), str(tiny_bert_path), "--output",
               str(tmp_path / "merged"), "--pick-on-dev", str(run), "--grid", "1", "0.5",
               "--quiet"]
    assert main(command) == 2
    shown = " ".join(capsys.readouterr().out.split())
    assert str(run / "results.json") in shown and "dev_carve.ids_digest" in shown
    # The same run recording today's carve gets as far as loading the models.
    (run / "results.json").write_text(json.dumps(
        {"status": "finished", "dev_carve": today(reference)}), encoding="utf-8")
    with pytest.raises(ModelsLoaded):
        main(command)


def test_merge_pick_on_dev_refuses_a_carving_run_without_results(
        tmp_path, tiny_bert_path, undivided_path, no_loading, capsys):
    run = fake_run(tmp_path / "run", tiny_bert_path, undivided_path)
    (run / "results.json").unlink()
    assert main(["merge", str(tiny_bert_path), str(tiny_bert_path), "--output",
                 str(tmp_path / "merged"), "--pick-on-dev", str(run), "--quiet"]) == 2
    shown = " ".join(capsys.readouterr().out.split())
    assert str(run) in shown and "no dev carve" in shown


def test_the_keys_that_decide_the_dev_set_include_the_carve_and_decontamination():
    assert {"dev_carve", "decontaminate"} <= set(soup_module.DEV_KEYS)
