"""Fixtures for the push tests: a fake Hub on 127.0.0.1 and a tiny trained tapt export.

- ``planted_token``: a token-shaped secret (``hf_`` + 34 characters) no file or output may
  ever contain.
- ``fake_hub``: a :class:`fake_hub.FakeHub` on a free port. For the test's duration
  ``HF_ENDPOINT`` points at it, ``HF_TOKEN`` is the planted token, the login cache is an empty
  temporary path, Xet is disabled (the fake Hub speaks the LFS protocol), and
  huggingface_hub's offline switch is lifted for this one host only: its HTTP client refuses
  every other host (recorded in ``fake_hub.refused``), so ``HF_HUB_OFFLINE`` semantics hold
  for everything else.
- ``tapt_export``: ``tapt train --test`` of the tiny BERT on the tiny BEIR folder (4 steps),
  run once per session with the planted token in the environment; read-only (copy it with
  ``shutil.copytree`` before changing it).
- ``hub_recipe(name, **sections)``: a recipe file for such a run under ``tmp_path``.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

import pytest
import yaml

HUB_TESTS = Path(__file__).resolve().parent
if str(HUB_TESTS) not in sys.path:
    sys.path.insert(0, str(HUB_TESTS))

from fake_hub import FakeHub
from push_helpers import files_containing

PLANTED_TOKEN = "hf_" + secrets.token_hex(17)  # 34 characters after hf_, like a real one


def recipe_dict(model: Path, data: Path, output: Path, **sections) -> dict:
    recipe = {
        "model": {"name": str(model), "max_seq_length": 128},
        "data": {"path": str(data), "dev_distractors": 5},
        "loss": {"name": "mnrl"},
        "training": {"epochs": 1, "max_steps": 4, "learning_rate": 5e-3,
                     "per_device_batch_size": 6, "bf16": False, "eval_steps": 2,
                     "logging_steps": 1, "warmup_ratio": 0.0, "seed": 7},
        "eval": {"batch_size": 8},
        "output_dir": str(output),
    }
    for section, values in sections.items():
        recipe.setdefault(section, {}).update(values)
    return recipe


@pytest.fixture(scope="session")
def planted_token() -> str:
    return PLANTED_TOKEN


@pytest.fixture
def fake_hub(tmp_path, monkeypatch, planted_token):
    from huggingface_hub import constants
    from huggingface_hub.errors import OfflineModeIsEnabled
    from huggingface_hub.utils import _http

    hub = FakeHub(tmp_path / "fake-hub-files", token=planted_token).start()
    allowed = hub.endpoint.split("://", 1)[1]

    def local_only_client():
        client = _http.default_client_factory()

        def refuse_other_hosts(request):
            if f"{request.url.host}:{request.url.port}" != allowed:
                hub.refused.append(str(request.url))  # seen even if the caller swallows it
                raise OfflineModeIsEnabled(f"test: {request.url} is not the fake Hub")

        hooks = client.event_hooks
        client.event_hooks = {**hooks, "request": [refuse_other_hosts, *hooks["request"]]}
        return client

    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.setenv("HF_TOKEN", planted_token)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-login" / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH",
                        str(tmp_path / "no-login" / "stored_tokens"))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    _http.set_client_factory(local_only_client)
    try:
        yield hub
    finally:
        _http.set_client_factory(_http.default_client_factory)
        hub.stop()


@pytest.fixture(scope="session")
def tapt_export(tmp_path_factory, tiny_bert_path, tiny_beir_path, planted_token) -> Path:
    from tapt.recipe import load_recipe
    from tapt.training.contrastive import train

    root = tmp_path_factory.mktemp("hub-export")
    recipe_file = root / "run.yaml"
    recipe_file.write_text(yaml.safe_dump(recipe_dict(tiny_bert_path, tiny_beir_path,
                                                      root / "run")), encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_TOKEN", planted_token)
        result = train(load_recipe(recipe_file), run_test=True)
    assert not files_containing(root, planted_token)
    return result.final_dir


@pytest.fixture
def hub_recipe(tmp_path, tiny_bert_path, tiny_beir_path):
    def make(name: str = "run", **sections) -> tuple[Path, Path]:
        output = tmp_path / name
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(recipe_dict(tiny_bert_path, tiny_beir_path, output,
                                                   **sections)), encoding="utf-8")
        return path, output
    return make
