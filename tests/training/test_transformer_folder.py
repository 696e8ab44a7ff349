"""DAPT finds a SentenceTransformer folder's transformers model through its modules.json,
checked: the module of the lowest idx, inside the folder, or a one-line error naming it."""

from __future__ import annotations

import json

import pytest

from tapt.training.dapt.mlm import transformer_folder


def folder_with(tmp_path, modules) -> str:
    (tmp_path / "modules.json").write_text(
        modules if isinstance(modules, str) else json.dumps(modules), encoding="utf-8")
    (tmp_path / "0_Transformer").mkdir()
    return str(tmp_path)


def test_the_module_of_the_lowest_idx_is_the_transformer(tmp_path):
    path = folder_with(tmp_path, [{"idx": 1, "path": "1_Pooling"},
                                  {"idx": 0, "path": "0_Transformer"}])
    assert transformer_folder(path) == str((tmp_path / "0_Transformer").resolve())
    assert transformer_folder(str(tmp_path / "no-modules-here")) == \
        str(tmp_path / "no-modules-here")  # a plain transformers folder or a Hub id


@pytest.mark.parametrize(("modules", "says"), [
    ("[", "not readable JSON"), ([], "non-empty list"), ({"0": "x"}, "non-empty list"),
    (["0_Transformer"], "non-empty list"), ([{"idx": "0", "path": ""}], "whole-number"),
    ([{"idx": 0, "path": "../elsewhere"}], "outside the model folder"),
    ([{"idx": 0, "path": "/etc"}], "outside the model folder"),
])
def test_a_bad_modules_list_is_refused_naming_the_file(tmp_path, modules, says):
    path = folder_with(tmp_path, modules)
    with pytest.raises(ValueError, match="modules.json") as caught:
        transformer_folder(path)
    assert says in str(caught.value)
