"""``tapt push`` end to end against the fake Hub, and ``--dry-run``."""

from __future__ import annotations

import io
import json
import logging

import numpy as np
import pytest
from huggingface_hub import ModelCard
from push_helpers import files_containing, folder_digest
from sentence_transformers import SentenceTransformer

from tapt.cli import main
from tapt.hub import push_export

REPO = "tapt-org/tiny-bert-formbench"
TEXTS = ["Which thickener keeps the hand cream stable at 45 C?",
         "The shampoo combines sodium laureth sulfate and cocamidopropyl betaine."]


@pytest.fixture
def all_logs():
    """Everything tapt and huggingface_hub log (huggingface_hub at debug level, where it
    logs every request), captured in a buffer."""
    from huggingface_hub.utils import logging as hf_logging

    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setLevel(logging.DEBUG)
    loggers = [logging.getLogger("tapt"), logging.getLogger("huggingface_hub")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
    hf_logging.set_verbosity_debug()
    logging.getLogger("tapt").setLevel(logging.DEBUG)
    yield buffer
    for lg, level in zip(loggers, levels):
        lg.removeHandler(handler)
        lg.setLevel(level)


def test_push_end_to_end(tapt_export, fake_hub, planted_token, capsys, caplog, all_logs):
    before = folder_digest(tapt_export)
    caplog.set_level(logging.DEBUG)
    assert main(["push", str(tapt_export), "--repo-id", REPO, "--private"]) == 0
    out, err = capsys.readouterr()

    # Every file arrived byte for byte, and nothing else (the repo's own .gitattributes).
    remote = fake_hub.repo_dir(REPO)
    assert folder_digest(remote) == {**before, ".gitattributes": folder_digest(remote)[
        ".gitattributes"]}
    assert folder_digest(tapt_export) == before
    local = SentenceTransformer(str(tapt_export), device="cpu")
    pushed = SentenceTransformer(str(remote), device="cpu")
    np.testing.assert_array_equal(local.encode(TEXTS), pushed.encode(TEXTS))
    assert pushed.prompts == local.prompts

    # The card on the Hub: license, library, pipeline, tags, datasets, dev and test metrics.
    metadata = ModelCard((remote / "README.md").read_text()).data.to_dict()
    assert metadata["license"] == "apache-2.0"
    assert metadata["library_name"] == "sentence-transformers"
    assert metadata["pipeline_tag"] == "sentence-similarity"
    assert "tapt" in metadata["tags"] and "datasets" not in metadata  # local data: no id
    splits = {result["dataset"]["split"] for entry in metadata["model-index"]
              for result in entry["results"]}
    assert splits == {"dev", "test"}
    assert "Apache License" in (remote / "LICENSE").read_text()
    assert (remote / "dev_curve.png").is_file() and (remote / "tapt_results.json").is_file()

    # What went over the wire: repo creation (private), the LFS path for the weights (no
    # Xet), one commit; every Hub API request carried the token, and only there.
    create = fake_hub.calls("POST", "/api/repos/create")
    assert len(create) == 1 and json.loads(create[0].body)["visibility"] == "private"
    assert not fake_hub.calls(pattern="xet")
    batch = fake_hub.calls("POST", r"\.git/info/lfs/objects/batch")
    lfs_oids = {obj["oid"] for call in batch for obj in json.loads(call.body)["objects"]}
    commit = fake_hub.calls("POST", f"/api/models/{REPO}/commit/main")
    assert len(commit) == 1
    operations = [json.loads(line) for line in commit[0].body.splitlines()]
    lfs_paths = {op["value"]["path"] for op in operations if op["key"] == "lfsFile"}
    assert "model.safetensors" in lfs_paths and "dev_curve.png" in lfs_paths
    assert {op["value"]["oid"] for op in operations if op["key"] == "lfsFile"} == lfs_oids
    assert len(fake_hub.calls("PUT", "/lfs-upload/")) == len(lfs_oids)
    for call in fake_hub.requests:
        if not call.path.startswith("/lfs-upload/"):
            assert call.headers["authorization"] == f"Bearer {planted_token}", call.path
        assert planted_token.encode() not in call.body

    assert fake_hub.refused == []  # nothing tried to reach another host
    assert json.loads(commit[0].body.splitlines()[0])["value"]["summary"] == "tapt: run"

    # The token is in no file, no output and no log line.
    assert not files_containing(tapt_export, planted_token)
    assert not files_containing(remote, planted_token)
    logs = all_logs.getvalue() + caplog.text
    assert "/commit/main" in logs  # huggingface_hub's debug log of the requests was captured
    for text in (out, err, logs):
        assert planted_token not in text
    assert "pushed to" in out and "model.safetensors" in out


def test_push_to_a_new_branch_and_again(tapt_export, fake_hub):
    result = push_export(tapt_export, REPO, revision="tapt-exp", commit_message="first")
    assert result.uploaded and result.commit_url.startswith(f"{fake_hub.endpoint}/{REPO}")
    assert len(fake_hub.calls("POST", f"/api/models/{REPO}/branch/tapt-exp")) == 1
    branch = fake_hub.repo_dir(REPO, "tapt-exp")
    assert (branch / "model.safetensors").read_bytes() == \
        (tapt_export / "model.safetensors").read_bytes()
    assert not (fake_hub.repo_dir(REPO) / "model.safetensors").exists()  # main untouched
    header = json.loads(fake_hub.calls("POST", "/commit/tapt-exp")[0].body.splitlines()[0])
    assert header["value"]["summary"] == "first"

    # A second push of the same folder: the branch exists (409 is fine), every file is
    # unchanged, so huggingface_hub makes no new commit and uploads nothing.
    uploads = len(fake_hub.calls("PUT"))
    push_export(tapt_export, REPO, revision="tapt-exp")
    assert len(fake_hub.calls("POST", "/commit/")) == 1
    assert len(fake_hub.calls("PUT")) == uploads


def test_dry_run_uploads_nothing(tapt_export, fake_hub, capsys):
    assert main(["push", str(tapt_export), "--repo-id", REPO, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert fake_hub.requests == [] and fake_hub.refused == []
    flat = "".join(out.split())
    for path in tapt_export.rglob("*"):
        if path.is_file():
            relative = path.relative_to(tapt_export).as_posix()
            assert relative in flat
            assert f"{path.stat().st_size:,}" in flat
    assert "license: apache-2.0" in out and "library_name: sentence-transformers" in out
    assert "## Task-adaptive training with tapt" in out
    assert "nothing was uploaded" in out
