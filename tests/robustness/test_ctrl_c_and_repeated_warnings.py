"""One behaviour for every command: Ctrl-C (SIGINT) stops it even when tapt was started
with SIGINT ignored (``cmd &`` in a script), and a warning repeated word for word prints
once. A stand-in command is put in ``COMMANDS`` so the entry point's own handling is what
runs, in a fresh process as a user's would."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tapt.cli.terminal import ShownOnce

AREA = "messages"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "COLUMNS": "10000"}

STAND_IN = textwrap.dedent("""
    import logging, sys, time
    from pathlib import Path
    import importlib
    entry = importlib.import_module("tapt.cli.main")

    def stand_in(args):
        log = logging.getLogger("tapt.data")
        for _ in range(3):
            log.warning("the same warning about %s", "train.jsonl")
        log.warning("another warning")
        Path(sys.argv[1]).write_text("started")
        for _ in range(600):  # 60 s: long enough for the test to interrupt it
            time.sleep(0.1)
        return 0

    entry.COMMANDS["cache"] = stand_in
    sys.exit(entry.main(["cache", "ls"]))
""")


def start(tmp_path: Path, sigint: signal.Handlers) -> tuple[subprocess.Popen, Path]:
    """The stand-in command in a child whose SIGINT starts as ``sigint``."""
    marker = tmp_path / "started"
    process = subprocess.Popen([sys.executable, "-c", STAND_IN, str(marker)], env=ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))  # noqa: PLW1509
    deadline = time.monotonic() + 120
    while not marker.is_file() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.is_file(), process.communicate(timeout=10)
    return process, marker


@pytest.mark.reliability(
    area=AREA, reader="every tapt command (Ctrl-C)",
    fault="SIGINT to a tapt process started with SIGINT ignored (cmd & in a script)",
    behaviour="stops like a foreground Ctrl-C: one 'interrupted' line, exit 130, no traceback")
@pytest.mark.parametrize("inherited", [signal.SIG_IGN, signal.SIG_DFL], ids=["ignored", "default"])
def test_ctrl_c_stops_a_command_however_it_was_started(tmp_path, inherited):
    process, _ = start(tmp_path, inherited)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, (out, err)
    assert "interrupted" in out and "Traceback" not in out + err


@pytest.mark.reliability(
    area=AREA, reader="every tapt command (its log)",
    fault="the same warning raised three times in one command",
    behaviour="printed once; other warnings and info lines still print")
def test_a_repeated_warning_prints_once(tmp_path):
    process, _ = start(tmp_path, signal.SIG_DFL)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    printed = " ".join((out + err).split())
    assert printed.count("the same warning about train.jsonl") == 1, printed
    assert "another warning" in printed


def test_shown_once_passes_info_and_new_texts_and_counts_repeats():
    shown = ShownOnce()

    def record(level: int, message: str, *args) -> logging.LogRecord:
        return logging.LogRecord("tapt", level, __file__, 1, message, args, None)

    assert shown.filter(record(logging.WARNING, "dropped %d queries", 3))
    assert not shown.filter(record(logging.WARNING, "dropped 3 queries"))  # same text
    assert shown.filter(record(logging.WARNING, "dropped %d queries", 4))
    assert shown.filter(record(logging.ERROR, "dropped 3 queries"))  # another level
    assert shown.filter(record(logging.INFO, "step 1")) and shown.filter(record(logging.INFO,
                                                                              "step 1"))
    assert shown.repeats == 1
