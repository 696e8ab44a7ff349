"""A recipe's ``hub:`` section pushes the export at the end of ``tapt train``."""

from __future__ import annotations

import json

from push_helpers import files_containing, folder_digest

from tapt.cli import main


def test_train_pushes_its_export(hub_recipe, fake_hub, planted_token, capsys):
    recipe_file, output = hub_recipe("pushed", hub={"repo_id": "tapt-org/from-recipe"})
    assert main(["train", str(recipe_file), "--test"]) == 0
    out, err = capsys.readouterr()

    final = output / "final"
    remote = fake_hub.repo_dir("tapt-org/from-recipe")
    local = folder_digest(final)
    assert {path: digest for path, digest in folder_digest(remote).items()
            if path != ".gitattributes"} == local
    assert {"model.safetensors", "LICENSE", "README.md", "tapt_results.json"} <= set(local)

    create = json.loads(fake_hub.calls("POST", "/api/repos/create")[0].body)
    assert create["visibility"] == "private"  # hub.private defaults to true in recipes
    header = json.loads(fake_hub.calls("POST", "/commit/main")[0].body.splitlines()[0])
    assert header["value"]["summary"] == "tapt: pushed"
    card = (remote / "README.md").read_text()
    assert 'SentenceTransformer("tapt-org/from-recipe")' in card  # usage snippet names the repo

    # The token was in the environment for the whole run: it is in no file and no output.
    assert not files_containing(output, planted_token)
    assert not files_containing(remote, planted_token)
    assert planted_token not in out + err


def test_dapt_pushes_its_export(hub_recipe, fake_hub, planted_token, tmp_path):
    import yaml

    recipe_file, output = hub_recipe("dapt-pushed")
    recipe = yaml.safe_load(recipe_file.read_text())
    del recipe["loss"]
    recipe["objective"] = {"name": "mlm"}
    recipe["chunking"] = {"max_length": 64, "overlap": 8}
    recipe["hub"] = {"repo_id": "tapt-org/dapt"}
    recipe_file.write_text(yaml.safe_dump(recipe))
    assert main(["dapt", str(recipe_file)]) == 0
    remote = fake_hub.repo_dir("tapt-org/dapt")
    assert folder_digest(output / "final") == {
        path: digest for path, digest in folder_digest(remote).items()
        if path != ".gitattributes"}
    assert (remote / "tapt_preset.json").is_file()
    assert not files_containing(output, planted_token)


def test_a_pushing_recipe_without_a_token_fails_before_training(hub_recipe, fake_hub,
                                                                monkeypatch, capsys):
    monkeypatch.delenv("HF_TOKEN")
    recipe_file, output = hub_recipe("no-token", hub={"repo_id": "tapt-org/x"})
    assert main(["train", str(recipe_file)]) == 2
    assert "no Hub token" in " ".join(capsys.readouterr().out.split())
    assert not output.exists()
    assert fake_hub.calls("POST", "/api/repos/create") == []
