"""Shared fixtures: tiny random models and a tiny BEIR folder, built once per session.

Session fixtures (treat the folders as read-only; copy one with ``shutil.copytree`` before
changing it):

- ``tiny_texts``: ~60 formulation-style sentences (the tokenizers are trained on them).
- ``tiny_bert_path``: SentenceTransformer folder, BERT 2x32, WordPiece, mean pooling,
  Normalize; max_seq_length 128. Its path matches no family, so ``family=auto`` is
  ``default``.
- ``tiny_qwen3_path``: SentenceTransformer folder, Qwen3 2x64 (4 heads, 2 kv heads),
  byte-level BPE ``Qwen2Tokenizer`` with ``<|endoftext|>`` as EOS/pad, left padding,
  last-token pooling, Normalize. Its folder is named ``tiny-qwen3`` so ``family=auto``
  selects the qwen3 preset. The saved tokenizer does NOT append EOS.
- ``tiny_beir_path``: BEIR folder (``write_beir``): 40 passages with titles, 12 queries
  (6 train, 3 dev, 3 test), each with an anchor (3), a hard (2) and a soft (1) negative.
- ``minilm_path``: folder of the packaged all-MiniLM-L6-v2 (skips when not installed).

The helpers behind them live in ``tests/tiny_models.py`` (``build_tiny_bert``,
``build_tiny_qwen3``, ``build_tiny_beir``, ``minilm_path``) for tests that need a variant.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# No network in tests: the Hub must never be contacted.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# No local-model embedding cache unless a test asks for one with --cache-dir (tests must not
# reuse each other's passages, nor write to ~/.cache).
os.environ.setdefault("TAPT_EMBEDDING_CACHE", "0")
# dtype and training.bf16 "auto" choose float32 on every CPU the tests run on, as on one
# without native bf16, so that results do not depend on the machine (subprocesses too);
# tests of the choice set TAPT_CPU_BF16 or patch the CPU's features themselves.
os.environ.setdefault("TAPT_CPU_BF16", "0")

import pytest
import yaml

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:  # `import tiny_models` under any import mode
    sys.path.insert(0, str(TESTS_DIR))

import tiny_models

from tapt.data.synth import synthesize

SHARED_DATA = TESTS_DIR.parent.parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def _offline_hub():
    """Keep the Hub offline for the whole session (also for subprocesses started by tests)."""
    previous = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    yield
    if previous is None:
        os.environ.pop("HF_HUB_OFFLINE", None)
    else:
        os.environ["HF_HUB_OFFLINE"] = previous


@pytest.fixture(scope="session")
def tiny_texts() -> list[str]:
    return tiny_models.formulation_sentences()


@pytest.fixture(scope="session")
def tiny_bert_path(tmp_path_factory, tiny_texts) -> Path:
    return tiny_models.build_tiny_bert(tmp_path_factory.mktemp("models") / "tiny-bert",
                                       tiny_texts)


@pytest.fixture(scope="session")
def tiny_qwen3_path(tmp_path_factory, tiny_texts) -> Path:
    return tiny_models.build_tiny_qwen3(tmp_path_factory.mktemp("models") / "tiny-qwen3",
                                        tiny_texts)


@pytest.fixture(scope="session")
def tiny_beir_path(tmp_path_factory) -> Path:
    return tiny_models.build_tiny_beir(tmp_path_factory.mktemp("data") / "tiny-beir")


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    return tiny_models.minilm_path()


@pytest.fixture(scope="session")
def cranfield_path() -> Path:
    """The shared Cranfield BEIR folder; skips when this checkout has no shared data."""
    folder = SHARED_DATA / "cranfield"
    if not (folder / "corpus.jsonl").is_file():
        pytest.skip(f"Cranfield data not found at {folder}")
    return folder


@pytest.fixture(scope="session")
def synth_path(tmp_path_factory) -> Path:
    """A FormBench-like BEIR folder: 48 queries (about 38 train / 5 dev / 5 test)."""
    folder = tmp_path_factory.mktemp("synth") / "data"
    synthesize(folder, queries=48, distractors=30, variant="structured", seed=3)
    return folder


def recipe_dict(model_path: Path, data_path: Path, output: Path, **sections) -> dict:
    """A CPU-sized recipe; ``sections`` update the defaults one section at a time."""
    recipe = {
        "model": {"name": str(model_path), "max_seq_length": 64},
        "data": {"path": str(data_path), "dev_distractors": 10},
        "loss": {"name": "mnrl"},
        "training": {"epochs": 1, "max_steps": 4, "learning_rate": 1e-3,
                     "per_device_batch_size": 8, "bf16": False, "eval_steps": 2,
                     "logging_steps": 1, "warmup_ratio": 0.0, "seed": 7},
        "eval": {"batch_size": 8},
        "output_dir": str(output),
    }
    for section, values in sections.items():
        if isinstance(values, dict):
            recipe.setdefault(section, {}).update(values)
        else:
            recipe[section] = values
    return recipe


@pytest.fixture
def make_recipe(tmp_path, tiny_bert_path, synth_path):
    """``make_recipe(name, model_path=, data_path=, **sections) -> (recipe file, output dir)``."""
    def make(name: str = "run", model_path: Path | None = None, data_path: Path | None = None,
             **sections) -> tuple[Path, Path]:
        output = tmp_path / name
        data_dict = recipe_dict(model_path or tiny_bert_path, data_path or synth_path, output,
                                **sections)
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data_dict), encoding="utf-8")
        return path, output
    return make
