"""A missing recipe or a bad key fails before torch, transformers or peft are imported
(the training code loads inside the handlers, after the recipe): seconds saved on every
typo. Checked in a fresh interpreter, by the modules loaded when the error is printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "transformers", "peft", "sentence_transformers")
SCRIPT = f"""
import json, sys
from tapt.cli import main
code = main(sys.argv[1:])
print(json.dumps({{"code": code, "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""


def run_main(argv: list[str], cwd: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["output"] = done.stdout
    return result


@pytest.fixture
def bad_recipe(tmp_path) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text("model:\n  name: x\n  no_such_key: 1\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("argv", [
    ["train", "missing.yaml"],
    ["train", "missing.yaml", "training.learning_rate=1e-5"],
    ["dapt", "missing.yaml"],
    ["validate", "missing.yaml"],
], ids=" ".join)
def test_a_missing_recipe_fails_before_the_training_code_loads(argv, tmp_path):
    result = run_main(argv, tmp_path)
    assert result["code"] == 2
    assert "missing.yaml: recipe not found" in result["output"]
    assert result["heavy"] == []


@pytest.mark.parametrize("command", ["train", "validate", "dapt"])
def test_a_bad_key_fails_before_the_training_code_loads(command, bad_recipe, tmp_path):
    result = run_main([command, str(bad_recipe)], tmp_path)
    assert result["code"] == 2
    assert "bad.yaml" in result["output"]
    assert result["heavy"] == []
