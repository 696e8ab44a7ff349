"""The training package's names and module sizes."""

from __future__ import annotations

from pathlib import Path

from tapt.training import run


def test_dapt_keeps_its_names_in_the_package():
    from tapt.training import dapt as package
    from tapt.training.dapt import mlm, simcse

    assert package.dapt.__module__ == "tapt.training.dapt"
    assert package.mlm_trainer is mlm.mlm_trainer
    assert package.set_dropout is simcse.set_dropout
    assert [name for name in package.__all__ if not hasattr(package, name)] == []


def test_no_training_module_is_above_500_lines():
    root = Path(run.__file__).parent
    long = {str(path.relative_to(root)): n for path in root.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 500}
    assert long == {}
