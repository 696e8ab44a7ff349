"""Every refusal happens before any request, names the folder or file, exits with code 2 and
leaves the folder as it was."""

from __future__ import annotations

import shutil

import pytest
from push_helpers import folder_digest

from tapt.cli import main
from tapt.hub import PushRefused, push_export

REPO = "tapt-org/refused"


def drop(name):
    def change(folder, token):
        (folder / name).unlink()
    return change


def write(name, text):
    def change(folder, token):
        (folder / name).write_text(text.replace("TOKEN", token))
    return change


def card_license(value):
    def change(folder, token):
        card = folder / "README.md"
        card.write_text(card.read_text().replace("license: apache-2.0", f"license: {value}", 1))
    return change


def link(folder, token):
    (folder / "notes.txt").symlink_to("/etc/hostname")


# (id, change to a copy of the export, extra CLI arguments, file named in the error (None:
# no file to name), words of the error)
CASES = [
    ("no-safetensors", drop("model.safetensors"), [], "", "no safetensors weights"),
    ("pickle-weights", write("pytorch_model.bin", "pickle"), [], "pytorch_model.bin",
     "pickle weights"),
    ("no-license", drop("LICENSE"), [], "LICENSE", "missing"),
    ("license-text", write("LICENSE", "MIT License\n"), [], "LICENSE", "not the Apache-2.0"),
    ("no-card", drop("README.md"), [], "README.md", "missing model card"),
    ("card-without-front-matter", write("README.md", "# a model\n"), [], "README.md",
     "no YAML front matter"),
    ("card-bad-yaml", write("README.md", "---\nlicense: [apache-2.0\n---\n# x\n"), [],
     "README.md", "does not parse"),
    ("card-license-mit", card_license("mit"), [], "README.md", "front matter license is 'mit'"),
    ("card-not-utf8", lambda folder, token: (folder / "README.md").write_bytes(
        b"---\nlicense: apache-2.0\n---\n\xff\xfe"), [], "README.md", "not valid UTF-8"),
    ("license-option-mismatch", None, ["--license", "mit"], "README.md",
     "expected 'mit'"),
    ("token-in-results", write("tapt_results.json", '{"note": "TOKEN"}'), [],
     "tapt_results.json", "contains a Hub token"),
    ("token-in-subfolder", write("1_Pooling/notes.md", "login with TOKEN"), [],
     "1_Pooling/notes.md", "contains a Hub token"),
    ("token-in-commit-message", None, ["--commit-message", "TOKEN"], None,
     "commit message contains a Hub token"),
    ("symlink", link, [], "notes.txt", "symbolic link"),
    ("does-not-load", write("modules.json", "[{not json"), [], "", "cannot load"),
    ("config-does-not-load", write("config.json", '{"model_type": "no-such-model"}'), [], "",
     "cannot load"),
]


@pytest.mark.parametrize("change, extra, named, words",
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_refused_before_any_upload(change, extra, named, words, tapt_export, tmp_path,
                                   fake_hub, planted_token, capsys):
    folder = tmp_path / "export"
    shutil.copytree(tapt_export, folder)
    if change is not None:
        change(folder, planted_token)
    extra = [arg.replace("TOKEN", planted_token) for arg in extra]
    before = folder_digest(folder)
    assert main(["push", str(folder), "--repo-id", REPO, *extra]) == 2
    out, err = capsys.readouterr()
    flat = " ".join(out.split())
    compact = "".join(out.split())
    assert "error:" in flat and words in flat, out
    if named is not None:
        assert str(folder / named).replace(" ", "") in compact
    assert planted_token not in out + err
    assert fake_hub.requests == []
    assert folder_digest(folder) == before


def test_refused_without_a_token(tapt_export, fake_hub, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(PushRefused, match="no Hub token: set HF_TOKEN or run `hf auth login`"):
        push_export(tapt_export, REPO)
    assert fake_hub.requests == []


def test_refused_offline(tapt_export, fake_hub, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(PushRefused, match="HF_HUB_OFFLINE"):
        push_export(tapt_export, REPO)
    assert push_export(tapt_export, REPO, dry_run=True).uploaded is False  # no network needed
    assert fake_hub.requests == []


@pytest.mark.parametrize("repo_id", ["no-namespace", "a/b/c", "org/na me"])
def test_refused_repo_id(repo_id, tapt_export, fake_hub, capsys):
    assert main(["push", str(tapt_export), "--repo-id", repo_id]) == 2
    assert "expected ORG/NAME" in capsys.readouterr().out
    assert fake_hub.requests == []


def test_token_from_the_login_cache_is_scanned_too(tapt_export, tmp_path, fake_hub,
                                                   monkeypatch):
    from huggingface_hub import constants

    cached = "hf_" + "L" * 34
    token_file = tmp_path / "login" / "token"
    token_file.parent.mkdir()
    token_file.write_text(cached)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(token_file))
    folder = tmp_path / "export"
    shutil.copytree(tapt_export, folder)
    (folder / "notes.txt").write_text(f"token={cached}")
    with pytest.raises(PushRefused, match="notes.txt: contains a Hub token") as refused:
        push_export(folder, REPO, dry_run=True)
    assert cached not in str(refused.value)


def test_a_recorded_remote_code_flag_never_turns_remote_code_on(tapt_export, fake_hub,
                                                                 tmp_path, capsys,
                                                                 monkeypatch):
    """``needs_remote_code: true`` in an export's record (which anyone who can plant a
    ``modeling_*.py`` can also write) makes ``tapt push`` refuse, naming the flag; the
    model's own code runs in the load check only with ``--trust-remote-code``."""
    import json

    from tapt.hub import checks

    folder = shutil.copytree(tapt_export, tmp_path / "export")
    record = json.loads((folder / "tapt_preset.json").read_text(encoding="utf-8"))
    (folder / "tapt_preset.json").write_text(json.dumps(record | {"needs_remote_code": True}),
                                             encoding="utf-8")
    trusted, real = [], checks.check_loads

    def spy(path, trust_remote_code=False, modules=None):
        trusted.append(trust_remote_code)
        return real(path, trust_remote_code, modules)

    monkeypatch.setattr(checks, "check_loads", spy)
    before = folder_digest(folder)
    assert main(["push", str(folder), "--repo-id", REPO, "--dry-run"]) == 2
    assert "--trust-remote-code" in capsys.readouterr().out
    assert trusted == [] and folder_digest(folder) == before
    assert main(["push", str(folder), "--repo-id", REPO, "--dry-run",
                 "--trust-remote-code"]) == 0
    assert trusted == [True] and fake_hub.requests == []
