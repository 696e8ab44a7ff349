"""``tapt data validate`` / ``stats`` read the splits that have a qrels file (a test-only
BEIR folder is valid) and say which they checked; ``--splits`` still asks for exact ones."""

from __future__ import annotations

import shutil

import pytest

from tapt.cli import main, terminal
from tapt.util.redaction import RedactingConsole


@pytest.fixture
def wide(monkeypatch):
    monkeypatch.setattr(terminal, "console", RedactingConsole(width=10_000, color_system=None))


@pytest.fixture
def test_only(tiny_beir_path, tmp_path):
    folder = tmp_path / "test-only"
    shutil.copytree(tiny_beir_path, folder)
    (folder / "qrels" / "train.tsv").unlink()
    (folder / "qrels" / "dev.tsv").unlink()
    return folder


def test_a_test_only_folder_is_valid_and_the_checked_split_is_named(test_only, capsys, wide):
    assert main(["data", "validate", str(test_only)]) == 0
    out = capsys.readouterr().out
    assert f"ok {test_only}" in out
    assert "checked splits test (3)" in out
    assert "no qrels file: train, dev" in out


def test_every_present_split_is_checked(tiny_beir_path, capsys, wide):
    assert main(["data", "validate", str(tiny_beir_path)]) == 0
    out = capsys.readouterr().out
    assert "checked splits train (6), dev (3), test (3)" in out


def test_an_asked_for_split_must_exist(test_only, capsys, wide):
    assert main(["data", "validate", str(test_only), "--splits", "dev"]) == 2
    assert "dev.tsv" in capsys.readouterr().out
    assert main(["data", "validate", str(test_only), "--splits", "test"]) == 0
    assert "not asked for: train, dev" in capsys.readouterr().out


def test_stats_of_a_test_only_folder(test_only, capsys, wide):
    assert main(["data", "stats", str(test_only)]) == 0
    assert "test" in capsys.readouterr().out


def test_a_folder_without_qrels_names_the_missing_file(test_only, capsys, wide):
    (test_only / "qrels" / "test.tsv").unlink()
    assert main(["data", "validate", str(test_only)]) == 2
    assert "train.tsv" in capsys.readouterr().out
