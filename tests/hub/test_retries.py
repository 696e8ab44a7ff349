"""Transient failures are retried once, by whoever owns the request (huggingface_hub's
``http_backoff`` or tapt); final failures name the repository and the files and change
nothing locally."""

from __future__ import annotations

import hashlib
import time

import pytest
from push_helpers import folder_digest

from tapt.cli import main
from tapt.hub import PushFailed, RetryPolicy, push_export

REPO = "tapt-org/flaky"


@pytest.fixture
def waits(monkeypatch):
    """No real waiting: every ``time.sleep`` (tapt's and huggingface_hub's) is recorded."""
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    monkeypatch.setattr("tapt.hub.push.DEFAULT_RETRY",
                        RetryPolicy(attempts=3, base_wait=0.5, max_wait=4.0))
    return slept


def weights_oid(export) -> str:
    return hashlib.sha256((export / "model.safetensors").read_bytes()).hexdigest()


@pytest.mark.parametrize("status, headers", [(500, {}), (503, {}), (429, {"Retry-After": "3"}),
                                             (None, {})], ids=["500", "503", "429", "drop"])
def test_transient_commit_failure_is_retried_by_tapt(status, headers, tapt_export, fake_hub,
                                                     waits):
    fake_hub.fail("POST", "/commit/main", status=status, times=1, headers=headers)
    result = push_export(tapt_export, REPO)
    assert result.uploaded
    assert len(fake_hub.calls("POST", "/commit/main")) == 2
    assert waits == [3.0 if status == 429 else 0.5]  # Retry-After honoured, else backoff
    remote = fake_hub.repo_dir(REPO)
    assert (remote / "model.safetensors").read_bytes() == \
        (tapt_export / "model.safetensors").read_bytes()


def test_dropped_repo_creation_is_retried(tapt_export, fake_hub, waits):
    fake_hub.fail("POST", "/api/repos/create", status=None, times=1)
    assert push_export(tapt_export, REPO).uploaded
    assert len(fake_hub.calls("POST", "/api/repos/create")) == 2


def test_lfs_upload_500_is_retried_by_huggingface_hub_alone(tapt_export, fake_hub, waits):
    oid = weights_oid(tapt_export)
    fake_hub.fail("PUT", f"/lfs-upload/{oid}", status=500, times=1)
    assert push_export(tapt_export, REPO).uploaded
    assert len(fake_hub.calls("PUT", f"/lfs-upload/{oid}")) == 2
    assert len(fake_hub.calls("POST", "/preupload/")) == 1  # no second create_commit
    assert len(fake_hub.calls("POST", "/commit/")) == 1
    assert waits == [1]  # huggingface_hub's http_backoff, first wait


def test_permanent_preupload_failure_is_not_retried_twice(tapt_export, fake_hub, waits):
    fake_hub.fail("POST", "/preupload/", status=500, times=None)
    with pytest.raises(PushFailed) as failed:
        push_export(tapt_export, REPO)
    # huggingface_hub tried 1 + 5 times; tapt did not start that over.
    assert len(fake_hub.calls("POST", "/preupload/")) == 6
    assert waits == [1, 2, 4, 8, 8]
    message = str(failed.value)
    assert REPO in message and "model.safetensors" in message and "HTTP 500" in message
    assert failed.value.files == sorted(failed.value.files) and "LICENSE" in failed.value.files


def test_permanent_commit_failure_fails_cleanly(tapt_export, tmp_path, fake_hub, waits,
                                                planted_token, capsys):
    before = folder_digest(tapt_export)
    fake_hub.fail("POST", "/commit/main", status=500, times=None)
    assert main(["push", str(tapt_export), "--repo-id", REPO]) == 1
    out, err = capsys.readouterr()
    assert len(fake_hub.calls("POST", "/commit/main")) == 3  # RetryPolicy(attempts=3)
    assert waits == [0.5, 1.0]
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: push to tapt-org/flaky failed")
    assert "while committing 14 files (tried 3 times): HTTP 500" in lines[0]
    assert "model.safetensors" in lines[0] and "README.md" in lines[0]
    assert planted_token not in out + err
    assert folder_digest(tapt_export) == before
    assert not fake_hub.repo_dir(REPO).joinpath("model.safetensors").exists()


def test_permanent_lfs_failure_names_the_file(tapt_export, fake_hub, waits):
    before = folder_digest(tapt_export)
    fake_hub.fail("PUT", f"/lfs-upload/{weights_oid(tapt_export)}", status=503, times=None)
    with pytest.raises(PushFailed, match="failed while uploading model.safetensors: HTTP 503"
                       ) as failed:
        push_export(tapt_export, REPO)
    assert failed.value.files == ["model.safetensors"] and failed.value.repo_id == REPO
    assert not fake_hub.calls("POST", "/commit/")
    assert folder_digest(tapt_export) == before


def test_client_errors_are_not_retried(tapt_export, fake_hub, waits):
    fake_hub.fail("POST", "/commit/main", status=403, times=None)
    with pytest.raises(PushFailed, match="HTTP 403"):
        push_export(tapt_export, REPO)
    assert len(fake_hub.calls("POST", "/commit/main")) == 1
    assert waits == []


@pytest.mark.parametrize("path, tapt_retries", [
    ("/api/repos/create", True),
    ("/api/validate-yaml", True),
    ("/api/models/org/name/commit/main", True),
    ("/api/models/org/name/branch/exp", True),
    ("/api/models/org/name", True),  # repo info
    ("/api/models/org/name/revision/exp", True),
    ("/hub-mirror/api/models/org/name/commit/main", True),  # HF_ENDPOINT with a path
    ("/api/models/org/name/preupload/main", False),  # http_backoff inside huggingface_hub
    ("/org/name.git/info/lfs/objects/batch", False),
    ("/lfs-upload/0123abcd", False),
    ("/api/models/org/name/xet-write-token/main", False),
])
def test_tapt_retries_only_what_huggingface_hub_sends_once(path, tapt_retries):
    from tapt.hub.upload import NOT_RETRIED_BY_HUB

    assert bool(NOT_RETRIED_BY_HUB.search(path)) is tapt_retries
