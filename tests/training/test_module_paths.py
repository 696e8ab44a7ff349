"""The training modules' old import paths still work and name the same objects."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tapt.training.tapt as old_tapt
from tapt.training import contrastive, run


def test_the_old_tapt_module_re_exports_the_recipe_and_the_shared_steps():
    from tapt.recipe import check_recipe

    assert old_tapt.train is contrastive.train
    assert old_tapt.TrainResult is contrastive.TrainResult
    assert old_tapt.read_history is run.read_history
    assert old_tapt.check_recipe is check_recipe
    missing = [name for name in old_tapt.__all__ if not hasattr(old_tapt, name)]
    assert missing == []


def test_dapt_keeps_its_names_in_the_package():
    from tapt.training import dapt as package
    from tapt.training.dapt import mlm, simcse

    assert package.dapt.__module__ == "tapt.training.dapt"
    assert package.mlm_trainer is mlm.mlm_trainer
    assert package.set_dropout is simcse.set_dropout
    assert [name for name in package.__all__ if not hasattr(package, name)] == []


def test_is_main_process_moved_with_an_alias(monkeypatch):
    from tapt.training.arguments import is_main_process as old
    from tapt.training.distributed import is_main_process

    assert old is is_main_process
    monkeypatch.setenv("RANK", "1")
    assert not is_main_process()
    monkeypatch.setenv("RANK", "0")
    assert is_main_process()


def test_the_old_path_imports_without_a_warning():
    """``-W error`` users import the deprecated module without it raising."""
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-W", "error", "-c", "import tapt.training.tapt"],
                   cwd=root, check=True, timeout=120)


def test_no_training_module_is_above_500_lines():
    root = Path(run.__file__).parent
    long = {str(path.relative_to(root)): n for path in root.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 500}
    assert long == {}
