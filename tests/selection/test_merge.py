"""``tapt merge``: weighted averages of models of one architecture, exported as tapt models.

The merged tensors must equal the weighted sum exactly (the formula of
:mod:`tapt.selection.merge`), bad weights and mismatched architectures are refused before
anything is written, the export loads and names its sources and weights, and
``--pick-on-dev`` keeps the grid weight with the best dev metric.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from sentence_transformers import SentenceTransformer

from tapt.cli import main
from tapt.selection.merge import best_weight, check_weights, merge
from tapt.selection.merge_types import GridPoint
from tapt.training.weights import MergeError, merge_state_dicts


@pytest.fixture(scope="module")
def perturbed_bert(tiny_bert_path, tmp_path_factory):
    """tiny BERT with seeded noise added to every floating-point tensor, saved again."""
    model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    generator = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    folder = tmp_path_factory.mktemp("models") / "tiny-bert-tuned"
    model.save(str(folder))
    return folder


def states(*folders) -> list[dict]:
    return [SentenceTransformer(str(folder), device="cpu").state_dict() for folder in folders]


def test_merged_weights_equal_the_weighted_sum_exactly(tmp_path, tiny_bert_path,
                                                      perturbed_bert):
    first, second = states(perturbed_bert, tiny_bert_path)
    assert not torch.equal(first["0.model.pooler.dense.weight"],
                           second["0.model.pooler.dense.weight"])
    merge([perturbed_bert, tiny_bert_path], tmp_path / "merged", weights=[0.3, 0.7])
    merged = SentenceTransformer(str(tmp_path / "merged"), device="cpu").state_dict()
    assert merged.keys() == first.keys()
    for key, tensor in merged.items():
        expected = (0.3 * first[key].double() + 0.7 * second[key].double()).to(torch.float32)
        assert tensor.dtype == torch.float32
        assert torch.equal(tensor, expected), key

    # weights (1, 0) give the first model bit for bit; equal weights are the default
    merge([perturbed_bert, tiny_bert_path], tmp_path / "first", weights=[1.0, 0.0])
    assert all(torch.equal(tensor, first[key]) for key, tensor in
               SentenceTransformer(str(tmp_path / "first"), device="cpu").state_dict().items())
    result = merge([perturbed_bert, tiny_bert_path, perturbed_bert], tmp_path / "three")
    assert result.weights == [1 / 3] * 3
    merged = SentenceTransformer(str(tmp_path / "three"), device="cpu").state_dict()
    key = "0.model.encoder.layer.0.attention.self.query.weight"
    third = 1 / 3
    expected = (third * first[key].double() + third * second[key].double()
                + third * first[key].double()).to(torch.float32)
    assert torch.equal(merged[key], expected)


def test_integer_tensors_are_copied_and_must_be_equal():
    floats = [torch.tensor([1.0, 2.0]), torch.tensor([3.0, 6.0])]
    ids = torch.arange(4)
    merged = merge_state_dicts([{"w": floats[0], "ids": ids}, {"w": floats[1], "ids": ids}],
                               [0.5, 0.5], ["a", "b"])
    assert torch.equal(merged["w"], torch.tensor([2.0, 4.0]))
    assert torch.equal(merged["ids"], ids) and merged["ids"].dtype == torch.int64
    with pytest.raises(MergeError, match=r"key 'ids' \(torch.int64\) differs between a and b"):
        merge_state_dicts([{"ids": ids}, {"ids": ids + 1}], [0.5, 0.5], ["a", "b"])
    with pytest.raises(MergeError, match=r"key 'w'.*not finite.*\bb\b"):
        merge_state_dicts([{"w": floats[0]}, {"w": torch.tensor([1.0, float("nan")])}],
                          [1.0, 0.0], ["a", "b"])


@pytest.mark.parametrize("weights, message", [
    ([0.5, 0.6], r"sum to 1.1.*not 1"),
    ([0.2, 0.3, 0.5], r"3 given for 2 models"),
    ([1.5, -0.5], r"value 1 must be"),
    ([float("nan"), 0.5], r"value 1 must be"),
    ([0.5, float("inf")], r"value 2 must be"),
])
def test_bad_weights_are_refused_naming_the_flag(weights, message):
    with pytest.raises(MergeError, match=message) as caught:
        check_weights(weights, 2)
    assert "--weights" in str(caught.value)


def test_weights_within_tolerance_and_default():
    assert check_weights([0.1, 0.2, 0.7 + 1e-8], 3) == [0.1, 0.2, 0.7 + 1e-8]
    assert check_weights(None, 4) == [0.25] * 4
    with pytest.raises(MergeError, match="at least two models"):
        check_weights(None, 1)


@pytest.mark.parametrize("extra, message", [
    (["--weights", "0.5", "0.6"], "--weights"),
    (["--weights", "0.5"], "--weights"),
    (["--pick-on-dev", "data", "--weights", "0.5", "0.5"], "--weights or --pick-on-dev"),
    (["--grid", "0", "1"], "--grid needs --pick-on-dev"),
])
def test_cli_refuses_bad_requests_before_loading(tmp_path, capsys, extra, message):
    # the models do not exist: the request is refused before any of them is looked at
    code = main(["merge", str(tmp_path / "a"), str(tmp_path / "b"), "--output",
                 str(tmp_path / "out"), *extra])
    err = capsys.readouterr().out
    assert code == 2
    assert "error:" in err and message in err
    assert not (tmp_path / "out").exists()


def test_cli_number_types_refuse_nan(tmp_path, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["merge", "a", "b", "--output", str(tmp_path / "out"), "--weights", "nan", "1"])
    assert caught.value.code == 2
    assert "--weights" in capsys.readouterr().err


def test_pick_on_dev_needs_two_models(tmp_path, tiny_bert_path, tiny_beir_path, capsys):
    code = main(["merge", str(tiny_bert_path), str(tiny_bert_path), str(tiny_bert_path),
                 "--output", str(tmp_path / "out"), "--pick-on-dev", str(tiny_beir_path)])
    assert code == 2 and "exactly two models, got 3" in capsys.readouterr().out


def test_architecture_mismatch_is_refused_naming_a_key(tmp_path, tiny_bert_path,
                                                      tiny_qwen3_path):
    with pytest.raises(MergeError) as caught:
        merge([tiny_bert_path, tiny_qwen3_path], tmp_path / "out")
    message = str(caught.value)
    assert re.search(r"key '0\.model\.[^']+'", message), message
    assert str(tiny_bert_path) in message and str(tiny_qwen3_path) in message
    assert "bert" in message and "qwen3" in message
    assert not (tmp_path / "out").exists()


def test_shape_mismatch_is_refused_naming_the_key_and_shapes(tmp_path, tiny_bert_path):
    import tiny_models

    wide = tiny_models.build_tiny_bert(tmp_path / "tiny-bert-wide", hidden_size=48)
    with pytest.raises(MergeError, match=r"key '0\.model\.embeddings\.word_embeddings\.weight' "
                                         r"has shape \(\d+, 48\) in .*tiny-bert-wide and "
                                         r"\(\d+, 32\)"):
        merge([tiny_bert_path, wide], tmp_path / "out")


def test_export_loads_and_its_card_names_sources_and_weights(tmp_path, tiny_bert_path,
                                                            perturbed_bert, capsys):
    from tapt.hub.checks import check_export

    out = tmp_path / "merged"
    code = main(["merge", str(perturbed_bert), str(tiny_bert_path), "--output", str(out),
                 "--weights", "0.75", "0.25"])
    assert code == 0, capsys.readouterr().out
    model = SentenceTransformer(str(out), device="cpu")
    assert model.encode(["Which thickener keeps the cream stable?"]).shape == (1, 32)
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "license: apache-2.0" in card and "library_name: sentence-transformers" in card
    assert "| `tiny-bert-tuned` | - | 0.75 |" in card
    assert "| `tiny-bert` | - | 0.25 |" in card
    assert (out / "LICENSE").is_file()
    record = json.loads((out / "tapt_preset.json").read_text(encoding="utf-8"))
    assert record["stage"] == "merge" and record["weights"] == [0.75, 0.25]
    assert [s["model"] for s in record["sources"]] == ["tiny-bert-tuned", "tiny-bert"]
    merged = json.loads((out / "merge.json").read_text(encoding="utf-8"))
    assert merged["weights"] == [0.75, 0.25] and merged["pick_on_dev"] is None
    for name in ("README.md", "tapt_preset.json", "merge.json"):  # no path of this machine
        assert str(tmp_path) not in (out / name).read_text(encoding="utf-8"), name
    check_export(out)  # what tapt push checks: weights, license, card, loads, finite


def test_output_is_refused_unless_overwrite_of_a_tapt_export(tmp_path, tiny_bert_path,
                                                           perturbed_bert, capsys):
    sources = [str(perturbed_bert), str(tiny_bert_path)]
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(["merge", *sources, "--output", str(plain)]) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().out
    assert main(["merge", *sources, "--output", str(plain), "--overwrite"]) == 2
    assert "not a tapt merge" in capsys.readouterr().out
    assert (plain / "notes.txt").read_text(encoding="utf-8") == "mine"

    out = tmp_path / "merged"
    assert main(["merge", *sources, "--output", str(out)]) == 0
    assert main(["merge", *sources, "--output", str(out), "--overwrite",
                 "--weights", "1", "0"]) == 0
    capsys.readouterr()
    assert json.loads((out / "merge.json").read_text(encoding="utf-8"))["weights"] == [1, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merged", "plain"]  # nothing left

    copy = tmp_path / "source-copy"
    shutil.copytree(out, copy)
    assert main(["merge", str(copy), str(tiny_bert_path), "--output", str(copy),
                 "--overwrite"]) == 2
    assert f"is the source model input ({copy.resolve()})" in capsys.readouterr().out


def test_best_weight_prefers_the_larger_first_weight_on_ties():
    points = [GridPoint(w, {"binary_ndcg@10": m}) for w, m in
              [(0.0, 0.5), (0.25, 0.7), (0.5, 0.7 - 1e-12), (0.75, 0.6)]]
    assert best_weight(points, "binary_ndcg@10") == 0.5
    assert best_weight(points[:2], "binary_ndcg@10") == 0.25


ROW = re.compile(r"^\W*(\d+(?:\.\d+)?)\W+(\d\.\d{4})\W+(\d\.\d{4})\W+(\d\.\d{4})\W+(\d\.\d{4})"
                 r"\W*(picked)?\W*$")


def test_pick_on_dev_keeps_the_weight_with_the_best_dev_metric(tmp_path, tiny_bert_path,
                                                              perturbed_bert, tiny_beir_path,
                                                              capsys):
    out = tmp_path / "picked"
    code = main(["merge", str(perturbed_bert), str(tiny_bert_path), "--output", str(out),
                 "--pick-on-dev", str(tiny_beir_path), "--grid", "0", "0.5", "0.8", "1",
                 "--metric", "graded_ndcg@10", "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    rows = [ROW.match(line) for line in printed.splitlines()]
    rows = [(float(m[1]), float(m[3]), bool(m[6])) for m in rows if m]  # weight, graded
    assert [weight for weight, _, _ in rows] == [0.0, 0.5, 0.8, 1.0], printed
    best = max(graded for _, graded, _ in rows)
    picked = [weight for weight, _, mark in rows if mark]
    assert picked == [max(w for w, graded, _ in rows if graded == best)]

    record = json.loads((out / "merge.json").read_text(encoding="utf-8"))
    grid = record["pick_on_dev"]["grid"]
    assert record["pick_on_dev"]["metric"] == "graded_ndcg@10"
    assert record["pick_on_dev"]["data"] == tiny_beir_path.name
    assert [round(g["graded_ndcg@10"], 4) for g in grid] == [graded for _, graded, _ in rows]
    assert record["pick_on_dev"]["picked_weight"] == picked[0]
    assert record["weights"] == [picked[0], 1.0 - picked[0]]
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "### Weights picked on dev" in card and "picked |" in card

    # the export is the merge at the picked weight
    first, second = states(perturbed_bert, tiny_bert_path)
    merged = SentenceTransformer(str(out), device="cpu").state_dict()
    w = picked[0]
    assert all(torch.equal(tensor, (w * first[key].double() + (1.0 - w) * second[key].double())
                           .to(torch.float32)) for key, tensor in merged.items())


@pytest.mark.parametrize("record", ["{", '{"family": "default"}', '{"stage": "mine"}'])
def test_overwrite_leaves_a_folder_whose_record_tapt_did_not_write(tmp_path, tiny_bert_path,
                                                                  perturbed_bert, capsys,
                                                                  record):
    """A SentenceTransformer folder with a ``tapt_preset.json`` that does not read back as
    tapt's (cut short, no stage, a stage tapt never writes) is not proof of a tapt export:
    ``--overwrite`` refuses it and every file stays."""
    theirs = Path(shutil.copytree(tiny_bert_path, tmp_path / "theirs"))
    (theirs / "tapt_preset.json").write_text(record, encoding="utf-8")
    before = {p.name: p.read_bytes() for p in theirs.iterdir() if p.is_file()}
    assert main(["merge", str(perturbed_bert), str(tiny_bert_path), "--output", str(theirs),
                 "--overwrite"]) == 2
    assert "not a tapt merge" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in theirs.iterdir() if p.is_file()} == before


def _copy_with(tmp_path, source, name, edit) -> Path:
    """A copy of the model folder ``source`` with one of its JSON files edited."""
    import json
    import shutil

    folder = tmp_path / name
    shutil.copytree(source, folder)
    modules = json.loads((folder / "modules.json").read_text())
    pooling = next(folder / m["path"] / "config.json" for m in modules
                   if m["type"].endswith("Pooling"))
    edit(folder, pooling)
    return folder


@pytest.mark.parametrize("what", ["pooling", "prompts"])
def test_models_that_encode_differently_are_refused(tmp_path, tiny_bert_path, what):
    """Same weights and architecture, other pooling or prompts: the merge would encode as
    whichever came first, so it is refused, naming what differs."""
    import json

    def edit(folder, pooling):
        if what == "pooling":
            config = json.loads(pooling.read_text())
            config["pooling_mode"] = "cls"
            pooling.write_text(json.dumps(config))
        else:
            path = folder / "config_sentence_transformers.json"
            config = json.loads(path.read_text()) if path.is_file() else {}
            config["prompts"] = {"query": "query: ", "document": "passage: "}
            path.write_text(json.dumps(config))

    other = _copy_with(tmp_path, tiny_bert_path, f"other-{what}", edit)
    word = "module 1 (Pooling)" if what == "pooling" else "prompts"
    with pytest.raises(MergeError, match=re.escape(f"their {word} differ")):
        merge([tiny_bert_path, other], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_pick_on_dev_of_data_without_a_dev_split_says_what_to_give(tmp_path, tiny_bert_path,
                                                                   tiny_beir_path, capsys):
    folder = tmp_path / "no-dev"
    shutil.copytree(tiny_beir_path, folder)
    (folder / "qrels" / "dev.tsv").unlink()
    assert main(["merge", str(tiny_bert_path), str(tiny_bert_path), "--output",
                 str(tmp_path / "out"), "--pick-on-dev", str(folder)]) == 2
    shown = capsys.readouterr().out
    assert "has no dev split" in shown and "run folder" in shown
    assert not (tmp_path / "out").exists()
