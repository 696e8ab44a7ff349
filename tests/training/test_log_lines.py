"""Training logs: tapt's lines, no raw Trainer dicts, no cursor-up codes when piped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_piped_training_logs_lines_not_dicts_and_no_cursor_codes(make_recipe, tmp_path):
    recipe_file, output = make_recipe("piped", training={"max_steps": 2, "eval_steps": 2,
                                                        "logging_steps": 1})
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tapt", "train", str(recipe_file)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout + done.stderr
    assert "\x1b[A" not in printed  # nested bars redrawn in a pipe
    assert "{'loss'" not in printed and "{'eval_" not in printed  # the Trainer's raw dicts
    assert "step 1/2: loss" in printed and "step 2/2: loss" in printed
    assert "trained 2 steps in" in printed
    assert (output / "final").is_dir()
