"""Fixtures for training tests: a small generated dataset and recipe files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tapt.data.synth import synthesize


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
