"""A damaged ``tapt_preset.json`` read only as a hint (tapt.encoders.preset_record): warned
of once per problem and fallback, not once per read."""

from __future__ import annotations

import logging

import pytest

from tapt.encoders import preset_record
from tapt.encoders.preset_record import read_record_hint


@pytest.fixture(autouse=True)
def no_hint_warned_yet(monkeypatch):
    """Each test starts with no hint warned of (the set lives for the process)."""
    monkeypatch.setattr(preset_record, "_HINTS_WARNED", set())


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_same_damaged_record_is_warned_of_once_per_fallback(tmp_path, caplog):
    (tmp_path / "tapt_preset.json").write_text("{not json")
    with caplog.at_level(logging.DEBUG, logger="tapt"):
        for _ in range(3):  # a table labels each of a model's result files
            assert read_record_hint(str(tmp_path), "labelled a base model") is None
        (warned,) = warnings_of(caplog)
        assert "tapt_preset.json" in warned and "labelled a base model" in warned
        assert sum("labelled a base model" in r.getMessage() for r in caplog.records) == 3
        caplog.clear()
        read_record_hint(str(tmp_path), "no recorded backend is checked")
        assert len(warnings_of(caplog)) == 1  # another consequence is said again
        caplog.clear()
        (tmp_path / "tapt_preset.json").write_text("[1]")  # another problem: warned of
        read_record_hint(str(tmp_path), "labelled a base model")
        assert len(warnings_of(caplog)) == 1
