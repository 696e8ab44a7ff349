"""CLEAR's residual hinge (``loss.name: clear``): a margin that shrinks with BM25's score gap
of the pair, in-batch negatives at the plain margin, labels from ``tapt score --teacher
bm25``."""

from __future__ import annotations

import json

import pytest
import torch

from tapt.recipe import RecipeError, load_recipe
from tapt.training.clear_loss import ClearLoss


class Fixed(torch.nn.Module):
    """A 'model' whose sentence embedding is the features' ``vector``."""

    def forward(self, features):
        return {"sentence_embedding": features["vector"]}


def features(*rows):
    return {"vector": torch.tensor(rows, dtype=torch.float32)}


def test_the_margin_shrinks_with_the_lexical_gap():
    """One row (a batch of one: no in-batch negatives): cos(q, p) = 0.8, cos(q, n) = 0.6.
    With xi 0.5 and lambda 0.5 the hinge is max(0, 0.5 - 0.5 gap - 0.2); a gap of 0.6 (BM25
    separates them) leaves 0, a gap of 0 leaves 0.3."""
    query = features([1.0, 0.0])
    positive = features([0.8, 0.6])
    negative = features([0.6, 0.8])
    loss = ClearLoss(Fixed(), xi=0.5, weight=0.5)
    assert float(loss([query, positive, negative], torch.tensor([[0.0]]))) == \
        pytest.approx(0.3)
    assert float(loss([query, positive, negative], torch.tensor([[0.2]]))) == \
        pytest.approx(0.2)
    assert float(loss([query, positive, negative], torch.tensor([[0.6]]))) == 0.0


def test_other_rows_passages_are_negatives_at_the_plain_margin():
    """Two rows: row 0's query sees row 1's positive and negative at margin xi."""
    queries = features([1.0, 0.0], [0.0, 1.0])
    positives = features([1.0, 0.0], [0.0, 1.0])
    negatives = features([0.0, 1.0], [1.0, 0.0])
    loss = ClearLoss(Fixed(), xi=0.5, weight=0.0)
    # own negatives: cos 0 vs positive 1 -> max(0, 0.5 - 1 + 0) = 0 for both rows.
    # in-batch: row 0 sees [0,1] (cos 0) and [1,0] (cos 1): hinge 0 and 0.5; row 1 alike.
    value = float(loss([queries, positives, negatives], torch.tensor([[0.0], [0.0]])))
    assert value == pytest.approx((0.5 + 0.5) / (2 + 4))


def test_clear_needs_the_lexical_teachers_scores(make_recipe):
    recipe_file, _ = make_recipe("no-teacher", loss={"name": "clear"})
    with pytest.raises(RecipeError, match="teacher_scores"):
        load_recipe(recipe_file)
    recipe_file, _ = make_recipe("grades", loss={"name": "clear", "grade_weight": 0.5,
                                                 "teacher_scores": "x.jsonl"})
    with pytest.raises(RecipeError, match="grade_weight"):
        load_recipe(recipe_file)
    recipe_file, _ = make_recipe("margin", loss={"name": "mnrl", "clear_margin": 0.3})
    with pytest.raises(RecipeError, match="clear_margin"):
        load_recipe(recipe_file)


def test_clear_trains_on_bm25_gaps(make_recipe, synth_path, tmp_path, monkeypatch):
    """End to end: tapt score --teacher bm25 labels the rows, each label is the row's
    normalised BM25 gap, and the run finishes with the loss recorded."""
    from tapt.cli.main import main
    from tapt.training import clear_loss
    from tapt.training.contrastive import train

    scores = tmp_path / "bm25.jsonl"
    assert main(["score", "--data", str(synth_path), "--teacher", "bm25", "--output",
                 str(scores), "--quiet"]) == 0
    seen: list[torch.Tensor] = []
    forward = clear_loss.ClearLoss.forward

    def recording(self, sentence_features, labels):
        seen.append(labels.detach().clone())
        return forward(self, sentence_features, labels)
    monkeypatch.setattr(clear_loss.ClearLoss, "forward", recording)
    recipe_file, _ = make_recipe("clear", loss={"name": "clear", "teacher_scores": str(scores)})
    result = train(load_recipe(recipe_file))
    assert result.final_dir is not None and seen
    teacher = {}
    for line in scores.read_text().splitlines():
        row = json.loads(line)
        teacher.setdefault(row["query_id"], {})[row["passage_id"]] = row["score"]
    # every gap is a difference of two scores of one query divided by its largest score
    possible = {round((a - b) / max(map(abs, row.values())), 4)
                for row in teacher.values() for a in row.values() for b in row.values()}
    assert all(round(float(gap), 4) in possible for batch in seen for gap in batch.flatten())
    assert json.loads((result.run_dir / "results.json").read_text())["status"] == "finished"
