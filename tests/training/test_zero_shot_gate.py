"""A TAPT run whose exported weights do not beat the zero-shot dev score says so at the end,
in results.json and in the model card; ``eval.require_beats_zero_shot`` makes it an error
that records the run and exports nothing. The card also states the test's seen and novel
queries."""

from __future__ import annotations

import json

import pytest

import tapt.training.losses as losses_module
from tapt.cards.run_card import tapt_card_section
from tapt.cli import main
from tapt.recipe import load_recipe
from tapt.training.zero_shot_gate import REFUSED_STATUS, gate_message, zero_shot_gate

METRIC = "binary_ndcg@10"


@pytest.fixture
def frozen(monkeypatch):
    """Training that cannot move the weights: the loss times zero (zero gradients, and no
    weight decay), so every checkpoint scores exactly the zero-shot dev metrics."""
    build = losses_module.build_loss

    def building(model, settings):
        loss = build(model, settings)
        forward = loss.forward
        loss.forward = lambda *args, **kwargs: forward(*args, **kwargs) * 0.0
        return loss
    monkeypatch.setattr(losses_module, "build_loss", building)


def test_a_run_that_does_not_beat_zero_shot_says_so_everywhere(make_recipe, frozen, capsys):
    recipe_file, output = make_recipe("frozen")
    assert main(["train", str(recipe_file), "--test"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "warning: this model does not beat its base model on dev" in shown

    history = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    assert len({entry[METRIC] for entry in history}) == 1  # nothing moved
    results = json.loads((output / "results.json").read_text())
    gate = results["zero_shot_gate"]
    assert gate == {"metric": METRIC, "zero_shot": history[0][METRIC],
                    "best": history[0][METRIC], "best_step": results["best_step"],
                    "compared": "best", "exported": "best", "beats_zero_shot": False}
    assert results["status"] == "finished"

    card = (output / "final" / "README.md").read_text()
    section = card.split("## Task-adaptive training with tapt", 1)[1]
    assert section.index("does not beat its base model on dev") < section.index("| hyperparameter")
    test = json.loads((output / "test.json").read_text())
    overlap = test["train_overlap"]
    assert "### Splits" in section
    assert (f"{overlap['seen']:,} are **seen** (a relevant passage is a `train` positive) and "
            f"{overlap['novel']:,} **novel**") in section


def test_require_beats_zero_shot_records_the_run_and_exports_nothing(make_recipe, frozen,
                                                                    capsys):
    recipe_file, output = make_recipe("required", eval={"require_beats_zero_shot": True})
    assert main(["train", str(recipe_file)]) == 4
    shown = " ".join(capsys.readouterr().out.split())
    assert "export refused: this model does not beat its base model on dev" in shown
    assert "eval.require_beats_zero_shot refuses the export" in shown
    assert not (output / "final").exists()
    assert not list(output.glob("final*"))  # no staging folder either
    assert list((output / "checkpoints").glob("checkpoint-*"))  # kept, as after a stop
    results = json.loads((output / "results.json").read_text())
    assert results["status"] == REFUSED_STATUS
    assert results["zero_shot_gate"]["beats_zero_shot"] is False
    # the record is true to the run: the best weights were scored, none exported
    assert results["zero_shot_gate"]["compared"] == "best"
    assert results["zero_shot_gate"]["exported"] is None
    assert set(results["summary"]) == {"zero-shot dev", "best dev"}
    assert results["history"] and "eval.require_beats_zero_shot" in results["error"]


def test_the_gate_compares_what_is_exported():
    history = [{"step": 0, METRIC: 0.5}, {"step": 2, METRIC: 0.6},
               {"step": 4, "error": "non-finite", METRIC: None}]
    beaten = zero_shot_gate(history, 2, METRIC)
    assert beaten["beats_zero_shot"] is True and gate_message(beaten) is None
    averaged = zero_shot_gate(history, 2, METRIC, {METRIC: 0.45})
    assert averaged["compared"] == averaged["exported"] == "averaged"
    assert averaged["beats_zero_shot"] is False
    assert gate_message(averaged) == ("this model does not beat its base model on dev: the "
                                      "averaged weights' dev binary_ndcg@10 0.4500 is not "
                                      "above the zero-shot 0.5000")
    equal = zero_shot_gate([{"step": 0, METRIC: 0.5}, {"step": 2, METRIC: 0.5}], 2, METRIC)
    assert equal["beats_zero_shot"] is False  # not above is not beating
    unknown = zero_shot_gate([{"step": 0, "error": "refused"}, {"step": 2, METRIC: 0.6}], 2,
                             METRIC)
    assert unknown["beats_zero_shot"] is None
    assert "could not be checked" in gate_message(unknown)


def test_the_card_states_the_gate_carve_decontamination_and_test_parts(make_recipe):
    recipe = load_recipe(make_recipe("card")[0])
    gate = {"metric": METRIC, "zero_shot": 0.5, "best": 0.4, "best_step": 4,
            "compared": "best", "exported": "best", "beats_zero_shot": False}
    splits = {"dev_carve": {"carved_from": "train", "split": "dev", "seed": 1, "queries": 10,
                            "remaining_train_queries": 28, "ids_digest": "00", "by": "group",
                            "groups": 7, "overlap": 0},
              "decontaminated": {"against": ["test"], "train_queries": [38, 30],
                                 "judgments": [120, 90]},
              "train_overlap": {"split": "test", "train_split": "train", "decontaminated":
                                ["test"], "seen": 0, "novel": 5, "seen_query_ids": [],
                                "metrics": {"novel": dict.fromkeys(
                                    ["binary_ndcg@10", "graded_ndcg@10", "mrr@10",
                                     "recall@100"], 0.25)},
                                "counts": {"novel": {METRIC: 5}}}}
    section = tapt_card_section(recipe, [], {}, 4, None, gate_warning=gate_message(gate),
                                splits=splits)
    assert ("> **Warning: This model does not beat its base model on dev: the best dev (step "
            "4) binary_ndcg@10 0.4000 is not above the zero-shot 0.5000.**") in section
    assert "10 queries carved from `train` in 7 whole groups" in section
    assert "Train decontaminated against `test`" in section
    assert "0 are **seen**" in section and "5 **novel** (train decontaminated against test)" \
        in section
    assert "| test, novel | 5 | 0.2500 |" in section
    plain = tapt_card_section(recipe, [], {}, 4, None)
    assert "### Splits" not in plain and "Warning" not in plain


def test_a_refused_gate_record_reads_back_and_names_a_false_export():
    from tapt.training.zero_shot_gate import gate_problem

    scored = {"metric": METRIC, "zero_shot": 0.5, "best": 0.4, "best_step": 4,
              "averaged": 0.45, "compared": "averaged", "beats_zero_shot": False}
    refused = {**scored, "exported": None}
    assert gate_problem(refused) is None
    assert "averaged weights' dev binary_ndcg@10 0.4500" in gate_message(refused)
    assert gate_problem({**scored, "exported": "best"})[0] == "exported"
    older = {key: value for key, value in scored.items() if key != "compared"}
    assert gate_problem({**older, "exported": "averaged"}) is None  # before "compared"
