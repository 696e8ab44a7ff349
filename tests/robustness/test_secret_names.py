"""Tokens in names: a name tapt derives from a user's value never holds a
secret (sweep trial folders, the run name the trainer records), an output path holding one
is refused, and ``tapt push`` refuses an export with a secret in any path it would upload
(a real push would publish it as a repository path)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from robustness.test_secrets import TOKEN, leaking_files

AREA = "secrets"
PLAIN_SECRET = "correct-horse-battery-staple-42"
"""An API key's value that has no token shape (only its exact value identifies it)."""


def names_holding(root: Path, secret: str) -> list[str]:
    return [str(path) for path in root.rglob("*") if secret in path.name]


@pytest.mark.reliability(
    area=AREA, reader="tapt sweep trial folders, trainer_state.json, training_args.bin",
    fault="tapt sweep base.yaml tracking.run_name=$HF_TOKEN,plain (HF_TOKEN set), trained",
    behaviour="the token's trial folder is named run_name=redacted-DIGEST-HASH; no file or "
              "folder name under the sweep holds the token, no file's bytes do "
              "(trainer_state.json, training_args.bin, recipe.yaml, sweep.json); sweep.json "
              "records the real folders")
def test_a_sweep_names_a_secret_value_by_a_digest_and_no_file_holds_it(make_recipe,
                                                                        monkeypatch, quiet_cli,
                                                                        capsys):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    recipe_file, output = make_recipe("secret-grid", training={"max_steps": 2, "eval_steps": 2})
    assert quiet_cli.main(["sweep", str(recipe_file), f"tracking.run_name={TOKEN},plain"]) == 0
    folder = output.with_name("secret-grid-sweep")
    assert names_holding(folder, TOKEN) == []
    assert leaking_files(folder, TOKEN) == []
    state = json.loads((folder / "sweep.json").read_text(encoding="utf-8"))
    folders = [Path(trial["folder"]) for trial in state["trials"]]
    assert all((path / "final").is_dir() for path in folders)  # the recorded paths are real
    assert sorted(path.parent for path in folders) == [folder, folder]
    secret_trial = next(p for p in folders if "plain" not in p.name)
    assert secret_trial.name.startswith("run_name=redacted-")
    assert list(secret_trial.glob("checkpoints/checkpoint-*/trainer_state.json"))
    assert list(secret_trial.glob("checkpoints/checkpoint-*/training_args.bin"))
    assert TOKEN not in capsys.readouterr().out


@pytest.mark.reliability(
    area=AREA, reader="tapt sweep trial folders",
    fault="a key's values holding the exact value of OPENAI_API_KEY, a key without a token "
          "shape (tracking.project=proj-KEY,proj-b)",
    behaviour="named by a digest (project=redacted-...); the other value keeps its readable "
              "name")
def test_a_sweep_value_holding_an_exact_secret_without_token_shape(make_recipe, monkeypatch,
                                                                   tmp_path):
    from tapt.selection.sweep import plan_sweep

    monkeypatch.setenv("OPENAI_API_KEY", PLAIN_SECRET)
    recipe_file, _ = make_recipe("plain-secret")
    plan = plan_sweep(recipe_file, [f"tracking.project=proj-{PLAIN_SECRET},proj-b"],
                      output=tmp_path / "sweep")
    names = [trial.folder.name for trial in plan.trials]
    assert not [name for name in names if PLAIN_SECRET in name]
    assert names[0].startswith("project=redacted-") and names[1].startswith("project=proj-b-")


@pytest.mark.reliability(
    area=AREA, reader="every output path (tapt bm25 --output, tapt train output_dir)",
    fault="tapt bm25 --output out-$HF_TOKEN.json; tapt train output_dir=runs/$HF_TOKEN",
    behaviour="refused (exit 2): the path holds the value of HF_TOKEN (printed as ***); no "
              "file or folder made")
def test_an_output_path_holding_a_secret_is_refused(make_recipe, tmp_path, monkeypatch,
                                                    quiet_cli, capsys):
    from robustness.conftest import write_dataset

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    data = write_dataset(tmp_path / "data")
    assert quiet_cli.main(["bm25", "--data", str(data), "--output",
                           str(tmp_path / "out" / f"bm25-{TOKEN}.json"), "--quiet"]) == 2
    printed = " ".join(capsys.readouterr().out.split())
    assert "--output" in printed and "holds the value of HF_TOKEN" in printed
    assert TOKEN not in printed and not (tmp_path / "out").exists()

    recipe_file, _ = make_recipe("r")
    runs = tmp_path / "runs"
    assert quiet_cli.main(["train", str(recipe_file), f"output_dir={runs / TOKEN}"]) == 2
    printed = " ".join(capsys.readouterr().out.split())
    assert "output_dir" in printed and "holds the value of HF_TOKEN" in printed
    assert not runs.exists()


@pytest.mark.reliability(
    area=AREA, reader="every output path (tapt bm25 --output, tapt train output_dir)",
    fault="an output path holding a token shape that is no secret of this machine "
          "(out-hf_....json, output_dir=runs/hf_...: someone else's token)",
    behaviour="refused (exit 2) as tapt push and sweep names refuse it: the path holds a "
              "token-shaped string (printed as ***); no file or folder made")
def test_an_output_path_holding_a_token_shape_is_refused(make_recipe, tmp_path, quiet_cli,
                                                         capsys):
    from robustness.conftest import write_dataset

    data = write_dataset(tmp_path / "data")
    assert quiet_cli.main(["bm25", "--data", str(data), "--output",
                           str(tmp_path / "out" / f"bm25-{OTHER_TOKEN}.json"), "--quiet"]) == 2
    printed = " ".join(capsys.readouterr().out.split())
    assert "--output" in printed and "holds a token-shaped string" in printed, printed
    assert OTHER_TOKEN not in printed and not (tmp_path / "out").exists()

    recipe_file, _ = make_recipe("r")
    runs = tmp_path / "runs"
    assert quiet_cli.main(["train", str(recipe_file), f"output_dir={runs / OTHER_TOKEN}"]) == 2
    printed = " ".join(capsys.readouterr().out.split())
    assert "output_dir" in printed and "holds a token-shaped string" in printed, printed
    assert not runs.exists()


# --------------------------------------------------------------------------- tapt push

def export_with(tiny_bert_path: Path, target: Path, relative: str) -> Path:
    """A plain export that passes every push check, plus a small file at ``relative``."""
    from robustness.conftest import export_like

    export = export_like(tiny_bert_path, target)
    path = export / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("notes\n", encoding="utf-8")
    return export


OTHER_TOKEN = "hf_" + "Zx8cV7bN6mQ5wE4rT3yU2iO1pA9sD0fGhJ"
"""A token shape that is no secret of this machine (someone else's token)."""
PATHS = {
    "a file named notes-$HF_TOKEN.txt": (f"notes-{TOKEN}.txt", "notes-***.txt",
                                         "the value of HF_TOKEN"),
    "a folder named extra-$HF_TOKEN/": (f"extra-{TOKEN}/notes.txt", "extra-***/notes.txt",
                                        "the value of HF_TOKEN"),
    "the value of OPENAI_API_KEY (no token shape) in a file name": (
        f"key-{PLAIN_SECRET}.txt", "key-***.txt", "the value of OPENAI_API_KEY"),
    "another account's token (hf_..., not set here) in a file name": (
        f"{OTHER_TOKEN}.txt", "***.txt", "a token-shaped string"),
}


@pytest.mark.reliability(
    area=AREA, reader="tapt push --dry-run (the paths it would upload)",
    fault="an export holding notes-$HF_TOKEN.txt; a folder extra-$HF_TOKEN/; a file named "
          "with OPENAI_API_KEY's value; a file named with a token shape that is no secret here",
    behaviour="refused (exit 2) before any upload, naming the path with *** and why (a "
              "repository path would publish it); nothing 'would push'")
@pytest.mark.parametrize("case", list(PATHS))
def test_push_refuses_a_secret_in_a_path_it_would_upload(case, tiny_bert_path, tmp_path,
                                                        monkeypatch, quiet_cli, capsys):
    relative, shown, why = PATHS[case]
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("OPENAI_API_KEY", PLAIN_SECRET)
    export = export_with(tiny_bert_path, tmp_path / "export", relative)
    assert quiet_cli.main(["push", str(export), "--repo-id", "my-org/tiny", "--dry-run"]) == 2
    printed = " ".join(capsys.readouterr().out.split())
    assert f"{export / shown}: its path holds {why}" in printed, printed
    assert "repository path" in printed and "would push" not in printed
    assert TOKEN not in printed and PLAIN_SECRET not in printed

    planted = export / relative.split("/")[0]  # the same export without it: pushable
    shutil.rmtree(planted) if planted.is_dir() else planted.unlink()
    assert quiet_cli.main(["push", str(export), "--repo-id", "my-org/tiny", "--dry-run"]) == 0
