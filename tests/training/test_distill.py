"""Distillation on teacher scores and grades: labels, recipe keys, tiny training runs."""

from __future__ import annotations

import pytest

from tapt.cli import main
from tapt.data.beir import load_beir_folder as load_beir
from tapt.data.triplets import build_rows, build_training_rows
from tapt.recipe import LossSettings, RecipeError, load_recipe, recipe_to_yaml
from tapt.retrieval.teacher_scores import TeacherScores
from tapt.training.contrastive import train
from tapt.training.distill import Labeler


def fake_teacher(dataset, split="train") -> TeacherScores:
    """A distinct score per (query, passage): 10, 9, 8, ... in judged order."""
    scores = {q: {d: 10.0 - i for i, d in enumerate(judged)}
              for q, judged in dataset.split(split).items()}
    return TeacherScores(path="fake.jsonl", teacher="fake", scores=scores)


def test_margin_mse_labels_are_teacher_differences(tiny_beir_path):
    dataset = load_beir(tiny_beir_path)
    teacher = fake_teacher(dataset)
    settings = LossSettings(name="margin_mse", teacher_scores="t.jsonl",
                            teacher_normalize="none")
    rows = build_training_rows(dataset, soft_negative=True,
                               labels=Labeler(dataset, "train", settings, teacher))
    _, stats = build_rows(dataset, soft_negative=True)
    assert len(rows) == len(stats.ids)
    for row, ids in zip(rows, stats.ids):
        query = teacher.scores[ids["query"]]
        positive = query[ids["positive"]]
        assert row["label"] == pytest.approx([positive - query[ids["negative"]],
                                              positive - query[ids["soft_negative"]]])


def test_grade_mix_formula(tiny_beir_path):
    dataset = load_beir(tiny_beir_path)
    teacher = fake_teacher(dataset)
    targets = {3: 1.0, 2: 0.6, 1: 0.1}
    weight = 0.25
    settings = LossSettings(name="distill_kl", teacher_scores="t.jsonl", grade_targets=targets,
                            grade_weight=weight)  # query_max: teacher / the query's top score
    labeler = Labeler(dataset, "train", settings, teacher)
    _, stats = build_rows(dataset, soft_negative=True)
    qrels = dataset.split("train")
    for ids in stats.ids:
        query_id = ids["query"]
        top = max(abs(s) for s in teacher.scores[query_id].values())
        expected = [(1 - weight) * teacher.scores[query_id][doc_id] / top
                    + weight * targets[qrels[query_id][doc_id]]
                    for column, doc_id in ids.items() if column != "query"]
        assert labeler(ids) == pytest.approx(expected)
    grades_only = Labeler(dataset, "train", LossSettings(
        name="distill_kl", grade_weight=1.0, grade_targets=targets), None)
    assert grades_only(stats.ids[0]) == pytest.approx([1.0, 0.6, 0.1])


def test_unjudged_passages_default_to_grade_zero_and_missing_grades_are_named(tiny_beir_path):
    dataset = load_beir(tiny_beir_path)
    query_id, judged = next(iter(dataset.split("train").items()))
    unjudged = next(doc_id for doc_id in dataset.corpus if doc_id not in judged)
    labeler = Labeler(dataset, "train", LossSettings(
        name="distill_kl", grade_weight=1.0, grade_targets={3: 1.0}), None)
    assert labeler.grade_target(query_id, unjudged) == 0.0
    hard = next(doc_id for doc_id, grade in judged.items() if grade == 2)
    with pytest.raises(ValueError, match="grade_targets has no target for grade 2"):
        labeler.grade_target(query_id, hard)


@pytest.mark.parametrize("loss, message", [
    ({"name": "margin_mse"}, "needs loss.teacher_scores"),
    ({"name": "mnrl", "grade_weight": 0.5}, "loss.grade_weight is for"),
    ({"name": "distill_kl", "grade_weight": 1.5}, "grade_weight"),
    ({"name": "distill_kl", "grade_weight": 1, "grade_targets": {3: "high"}}, "grade_targets"),
])
def test_distillation_keys_are_checked_at_load(make_recipe, loss, message):
    recipe_file, _ = make_recipe("bad", loss=loss)
    with pytest.raises(RecipeError, match=message):
        load_recipe(recipe_file)


def test_saved_distillation_recipe_reloads(make_recipe):
    recipe_file, _ = make_recipe("ok", loss={"name": "distill_kl", "grade_weight": 1,
                                             "grade_targets": {3: 1.0, 2: 0.4}})
    recipe = load_recipe(recipe_file)
    saved = recipe_file.parent / "saved.yaml"  # as a run folder records it: JSON keys
    saved.write_text(recipe_to_yaml(recipe), encoding="utf-8")
    assert load_recipe(saved).loss.grade_targets == {3: 1.0, 2: 0.4}


@pytest.mark.parametrize("loss", [
    {"name": "margin_mse"},
    {"name": "distill_kl", "grade_weight": 0.5},
])
def test_two_step_training_on_teacher_scores(make_recipe, synth_path, tmp_path, loss):
    scores = tmp_path / "scores.jsonl"
    assert main(["score", "--data", str(synth_path), "--teacher", "bm25", "--output",
                 str(scores), "--quiet"]) == 0
    recipe_file, _ = make_recipe(f"distill-{loss['name']}", data={"soft_negative": True},
                                 loss={**loss, "teacher_scores": str(scores)},
                                 training={"max_steps": 2, "eval_steps": 2})
    result = train(load_recipe(recipe_file))
    assert result.final_dir is not None
    assert [entry["step"] for entry in result.history][-1] == 2


def test_grades_only_training_needs_no_teacher(make_recipe):
    recipe_file, _ = make_recipe("grades", loss={"name": "distill_kl", "grade_weight": 1},
                                 training={"max_steps": 2, "eval_steps": 2})
    assert train(load_recipe(recipe_file)).final_dir is not None


def test_score_file_of_other_data_is_refused_before_training(make_recipe, synth_path,
                                                             tiny_beir_path, tmp_path):
    scores = tmp_path / "other.jsonl"
    assert main(["score", "--data", str(tiny_beir_path), "--teacher", "bm25", "--output",
                 str(scores), "--quiet"]) == 0
    recipe_file, output = make_recipe("wrong", loss={"name": "margin_mse",
                                                     "teacher_scores": str(scores)})
    with pytest.raises(ValueError, match=f"{scores}: made from other data .*its corpus, "
                                         "queries, qrels differ"):
        train(load_recipe(recipe_file))
    assert not (output / "recipe.yaml").exists()
    scores.with_name(scores.name + ".digest.json").unlink()  # no record: the lines decide
    with pytest.raises(ValueError, match=f"{scores}:1: field 'query_id'"):
        train(load_recipe(recipe_file))
    assert not (output / "recipe.yaml").exists()
