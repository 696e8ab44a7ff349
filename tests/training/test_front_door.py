"""The front door of a training run: failures that come early and in one line, cards that
say what the run did, result files that other commands read."""

from __future__ import annotations

import pytest

from tapt.cli import main
from tapt.recipe import RecipeError, load_recipe
from tapt.training.tracking import check_wandb

wandb = pytest.importorskip("wandb")


@pytest.fixture
def no_wandb_login(tmp_path, monkeypatch):
    """A W&B without any credentials: no key, an empty netrc, empty settings; W&B's
    process-wide setup and session credentials reset before and after."""
    for name in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_MODE", "WANDB_DISABLED",
                 "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    netrc = tmp_path / "netrc"
    netrc.write_text("")
    monkeypatch.setenv("NETRC", str(netrc))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-dir"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    wandb.teardown()
    yield netrc
    wandb.teardown()


def test_wandb_without_credentials_fails_before_anything_loads(make_recipe, no_wandb_login,
                                                               capsys):
    recipe_file, output = make_recipe("wb", tracking={"backend": "wandb"})
    with pytest.raises(RecipeError, match="tracking.backend: wandb: no W&B credentials"):
        from tapt.training.contrastive import train

        train(load_recipe(recipe_file))
    assert not output.exists()  # refused before the run folder, the data and the model
    capsys.readouterr()
    assert main(["train", str(recipe_file)]) == 2
    out = capsys.readouterr().out.strip()
    assert out.startswith("error: tracking.backend: wandb: no W&B credentials")
    assert "WANDB_MODE=offline" in out and "Traceback" not in out


@pytest.mark.parametrize("mode", ["offline", "dryrun", "disabled"])
def test_wandb_offline_needs_no_credentials(no_wandb_login, monkeypatch, mode):
    monkeypatch.setenv("WANDB_MODE", mode)
    check_wandb("wandb")


def test_wandb_credentials_are_found_in_the_environment_and_netrc(no_wandb_login, monkeypatch):
    from wandb.sdk import wandb_setup

    key = "a" * 40
    monkeypatch.setenv("WANDB_API_KEY", key)
    check_wandb("wandb")
    wandb.teardown()
    monkeypatch.delenv("WANDB_API_KEY")
    with pytest.raises(RecipeError, match="no W&B credentials"):
        check_wandb("wandb")
    wandb.teardown()
    host = wandb_setup.singleton().settings.base_url.split("://", 1)[-1].rstrip("/")
    no_wandb_login.write_text(f"machine {host}\n  login user\n  password {key}\n")
    no_wandb_login.chmod(0o600)
    check_wandb("wandb")


def test_wandb_malformed_settings_fail_in_one_line(no_wandb_login, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "short")
    with pytest.raises(RecipeError, match="tracking.backend: wandb: W&B cannot start: "
                                          "WANDB_API_KEY invalid"):
        check_wandb("wandb")
    wandb.teardown()
    monkeypatch.delenv("WANDB_API_KEY")
    monkeypatch.setenv("WANDB_MODE", "onlin")
    with pytest.raises(RecipeError, match="W&B cannot start: mode: Input should be"):
        check_wandb("wandb")


def test_other_backends_are_not_checked(no_wandb_login):
    check_wandb("none")
    check_wandb("tensorboard")


def test_push_of_a_run_folder_names_its_export(tmp_path, capsys):
    from tapt.hub import push_export
    from tapt.hub.errors import PushRefused

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "recipe.yaml").write_text("model: {}\n")
    with pytest.raises(PushRefused, match="a tapt run folder without an export yet"):
        push_export(run, "my-org/model", dry_run=True)
    (run / "final").mkdir()
    with pytest.raises(PushRefused, match=f"push its export: tapt push {run / 'final'}"):
        push_export(run, "my-org/model", dry_run=True)
    assert main(["push", str(run), "--repo-id", "my-org/model", "--dry-run"]) == 2
    assert f"tapt push {run / 'final'}" in capsys.readouterr().out.replace("\n", "")


def test_tapt_imports_without_faiss_and_a_search_names_both_extras():
    import subprocess
    import sys

    code = ("import sys; sys.modules['faiss'] = None\n"  # import faiss -> ImportError
            "import tapt\n"
            "from tapt.retrieval.search import FaissMissingError, make_index\n"
            "try:\n    make_index(4, backend='faiss')\n"
            "except FaissMissingError as err:\n    print('refused:', err)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert 'refused: faiss is not installed' in done.stdout
    assert '"tapt[cpu]"' in done.stdout and '"tapt[gpu]"' in done.stdout


def test_pinned_ranges_hold_the_installed_versions():
    import importlib.metadata
    from pathlib import Path

    from packaging.requirements import Requirement

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    requirements = {Requirement(text).name: Requirement(text) for text in project["dependencies"]}
    assert "faiss-cpu" not in requirements  # an extra: tapt[cpu] or tapt[gpu], never both
    extras = project["optional-dependencies"]
    assert any(text.startswith("faiss-cpu") for text in extras["cpu"] + extras["test"])
    assert any(text.startswith("faiss-gpu") for text in extras["gpu"])
    for name in ("transformers", "sentence-transformers", "accelerate"):
        specifier = requirements[name].specifier
        assert any(spec.operator == "<" for spec in specifier), f"{name}: no upper bound"
        assert specifier.contains(importlib.metadata.version(name)), name


# --- model cards ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tapt_run(tmp_path_factory, tiny_bert_path, tiny_beir_path):
    """A finished TAPT run on local model and data, stopped by max_steps, with --test."""
    import yaml

    from tapt.training.contrastive import train

    root = tmp_path_factory.mktemp("front-door")
    recipe_file = root / "run.yaml"
    recipe_file.write_text(yaml.safe_dump({
        "model": {"name": str(tiny_bert_path), "max_seq_length": 64},
        "data": {"path": str(tiny_beir_path), "dev_distractors": 10},
        "training": {"epochs": 3, "max_steps": 2, "learning_rate": 1e-3,
                     "per_device_batch_size": 8, "bf16": False, "eval_steps": 2,
                     "logging_steps": 1, "warmup_ratio": 0.0, "seed": 7},
        "eval": {"batch_size": 8},
        "output_dir": str(root / "run")}))
    train(load_recipe(recipe_file), run_test=True)
    return root / "run", recipe_file


def card_parts(text: str) -> tuple[dict, str]:
    from huggingface_hub import ModelCard

    card = ModelCard(text)
    return card.data.to_dict(), card.text


def test_tapt_card_puts_its_section_first_and_says_what_stopped_training(tapt_run,
                                                                         tiny_bert_path,
                                                                         tiny_beir_path):
    from tapt.cards.run_card import CARD_SECTION_MARKER

    run, _ = tapt_run
    text = (run / "final" / "README.md").read_text()
    metadata, body = card_parts(text)
    lines = [line for line in body.splitlines() if line.strip()]
    assert lines[0].startswith("# ") and lines[1] == CARD_SECTION_MARKER  # first, under the title
    assert body.index(CARD_SECTION_MARKER) < body.index("### Full Model Architecture")
    assert "| max steps | 2 |" in body and "| epochs |" not in body  # not "epochs 3"
    assert "datasets" not in metadata  # a local folder's name is no dataset id
    assert metadata["license"] == "apache-2.0" and metadata["model-index"]
    for path in (tiny_bert_path, tiny_beir_path, run):
        assert str(path) not in text  # no path of this machine


def test_tapt_card_rewrite_replaces_its_section(tapt_run):
    import json

    from tapt.cards.run_card import CARD_SECTION_MARKER, write_card
    from tapt.training.zero_shot_gate import gate_message

    run, recipe_file = tapt_run
    final = run / "final"
    before = (final / "README.md").read_text()
    summary = json.loads((final / "tapt_results.json").read_text())
    history = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    from tapt.analysis.run_records import split_records

    results_file = run / "results.json"
    results = json.loads(results_file.read_text())
    splits = split_records(results, results_file, run / "test.json")
    assert "train_overlap" in splits  # the first card had them: the rewrite must too
    write_card(final, load_recipe(recipe_file), history=history, summary=summary, best_step=2,
               gate_warning=gate_message(results.get("zero_shot_gate")), splits=splits)
    after = (final / "README.md").read_text()
    assert after.count(CARD_SECTION_MARKER) == 1
    assert after == before
    write_card(final, load_recipe(recipe_file), history=history, summary=summary, best_step=2)
    assert "### Splits" not in (final / "README.md").read_text()  # replaced, not appended


def test_tapt_card_loads_the_pushed_repository(tapt_run):
    import json

    from tapt.cards.run_card import tapt_card_section

    run, recipe_file = tapt_run
    recipe = load_recipe(recipe_file)
    summary = json.loads((run / "final" / "tapt_results.json").read_text())
    pushed = recipe.model_copy(update={"hub": recipe.hub.model_copy(
        update={"repo_id": "my-org/tiny-tapt"})})
    section = tapt_card_section(pushed, [], summary, 2, None)
    assert 'SentenceTransformer("my-org/tiny-tapt")' in section
    assert "tapt eval --model my-org/tiny-tapt" in section
    assert "PATH_OR_REPO_ID" not in section
    assert "PATH_OR_REPO_ID" in tapt_card_section(recipe, [], summary, 2, None)  # not pushed


def test_dapt_export_has_its_own_card(tmp_path, tiny_bert_path, synth_path):
    import yaml

    from tapt.training.dapt import dapt

    recipe_file = tmp_path / "dapt.yaml"
    recipe_file.write_text(yaml.safe_dump({
        "model": {"name": str(tiny_bert_path), "max_seq_length": 64},
        "data": {"path": str(synth_path), "dev_split": None, "held_out_fraction": 0.1},
        "objective": {"name": "mlm"},
        "chunking": {"max_length": 32},
        "training": {"max_steps": 2, "per_device_batch_size": 8, "bf16": False,
                     "eval_steps": 2, "logging_steps": 1, "warmup_ratio": 0.0},
        "output_dir": str(tmp_path / "dapt")}))
    result = dapt(load_recipe(recipe_file, kind="dapt"))
    text = (result.final_dir / "README.md").read_text()
    metadata, body = card_parts(text)
    assert body.lstrip().startswith("# DAPT dapt (")
    assert "## Domain-adaptive pretraining with tapt" in body
    # not the base model's card with a section appended
    assert "### Full Model Architecture" not in body and "Training Hyperparameters" not in body
    assert metadata["license"] == "apache-2.0" and "datasets" not in metadata
    for path in (tiny_bert_path, synth_path, tmp_path):
        assert str(path) not in text  # was: the absolute path of the base model and the data


# --- result files ----------------------------------------------------------------------------

def test_train_test_writes_a_result_file_tapt_compare_reads(tapt_run, capsys):
    import json

    from tapt.analysis.compare import compare_results, read_result

    run, _ = tapt_run
    test_file = run / "test.json"
    result = read_result(test_file)  # the format of tapt eval --output
    results = json.loads((run / "results.json").read_text())
    for key, value in results["summary"]["TAPT test"].items():
        assert result[key] == value
    assert result["evaluated"]["split"] == "test" and result["per_query"]
    overlap = result["train_overlap"]  # against the queries the run trained on
    assert overlap["split"] == "test" and overlap["train_split"] == "train"
    assert overlap["seen"] + overlap["novel"] == len(result["per_query"])
    assert result["evaluated"]["model"] == str(run / "final")
    comparison = compare_results([str(test_file)])
    assert comparison.rows[0].kind == "tapt"  # the export's tapt_preset.json says so
    capsys.readouterr()
    assert main(["compare", f"TAPT={test_file}"]) == 0
    assert "TAPT" in capsys.readouterr().out


def test_result_files_use_stable_keys_and_record_where_they_came_from(tapt_run, tmp_path):
    import importlib.metadata
    import json
    from datetime import datetime

    from tapt.retrieval.evaluate import EvalReport

    run, _ = tapt_run
    results = json.loads((run / "results.json").read_text())
    assert set(results["summary"]) == {"zero-shot dev", "best dev", "zero-shot test",
                                       "TAPT test"}  # no step number inside a key
    assert results["best_step"] == 2
    eval_file = tmp_path / "eval.json"
    EvalReport(metrics={}, per_query={}, run={}, timings={}, info={}).write_json(eval_file)
    for path in (run / "results.json", run / "test.json", eval_file):
        provenance = json.loads(path.read_text())["provenance"]
        assert provenance["tapt"] == importlib.metadata.version("tapt"), path
        for name in ("transformers", "sentence-transformers", "accelerate", "torch"):
            assert provenance["libraries"][name] == importlib.metadata.version(name), path
        assert provenance["libraries"]["faiss"]
        assert datetime.fromisoformat(provenance["date"]).tzinfo is not None
        assert isinstance(provenance["command"], str) and provenance["command"]


def test_the_command_is_recorded_redacted():
    from tapt.util.provenance import command_line

    assert command_line(["/venv/bin/tapt", "train", "r.yaml", "--test"]) == \
        "tapt train r.yaml --test"
    assert command_line(["/x/tapt/__main__.py", "eval", "--model", "a b"]) == \
        "python -m tapt eval --model 'a b'"
    token = "hf_" + "abcdefghijklmnopqrstuvwxyz0123456789"
    assert token not in command_line(["tapt", "train", "r.yaml", f"hub.commit_message={token}"])
