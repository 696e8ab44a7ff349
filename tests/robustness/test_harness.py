"""The classification the reliability report relies on: a hang, a library traceback, a
library message behind exit code 2 and a partial output are each caught (these cases are
not report rows)."""

from __future__ import annotations

import json
import time

from robustness.reliability import Case
from tapt.data.beir import DataError


def test_a_hang_is_stopped_and_named():
    case = Case("harness", "sleep")
    start = time.monotonic()
    outcome = case.api(time.sleep, 30, timeout=0.3)
    assert outcome.kind == "hang"
    assert time.monotonic() - start < 5


def test_a_library_exception_is_a_traceback_and_tapts_own_is_a_refusal(tmp_path):
    case = Case("harness", "errors")
    assert case.api(json.loads, "{").kind == "traceback"
    assert case.api(int, "x").kind == "traceback"

    def refuse():
        raise DataError(tmp_path / "f.jsonl", "bad", 3, "_id")

    outcome = case.api(refuse).assert_refused(tmp_path / "f.jsonl", 3, "_id")
    assert outcome.kind == "refused"


def test_a_partial_output_is_seen(tmp_path):
    case = Case("harness", "partial")

    def write_then_fail():
        (tmp_path / "out.json").write_text("{")
        raise DataError(tmp_path / "in.jsonl", "bad", 1)

    outcome = case.api(write_then_fail, watch=[tmp_path])
    assert outcome.partial_outputs == [str(tmp_path / "out.json")]


def test_a_library_message_behind_exit_code_2_is_not_a_refusal(monkeypatch, quiet_cli, capsys):
    def broken(args):
        return json.loads("{")  # a library error that main() turns into exit 2

    monkeypatch.setitem(quiet_cli.COMMANDS, "validate", broken)
    outcome = Case("harness", "cli").cli(["validate", "x.yaml"], capsys)
    assert outcome.exit_code == 2
    assert outcome.kind == "library error"
