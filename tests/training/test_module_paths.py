"""The training package's names (module sizes: tests/test_import_layers.py, for every
module of tapt/)."""

from __future__ import annotations


def test_dapt_keeps_its_names_in_the_package():
    from tapt.training import dapt as package
    from tapt.training.dapt import mlm, simcse

    assert package.dapt.__module__ == "tapt.training.dapt"
    assert package.mlm_trainer is mlm.mlm_trainer
    assert package.set_dropout is simcse.set_dropout
    assert [name for name in package.__all__ if not hasattr(package, name)] == []

