"""What the CLI prints when its output is piped (a log, CI): no cursor-up codes from nested
progress bars, tables not cut at 80 columns, whole numbers as integers; ``--quiet`` prints
results and warnings only."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tapt.cli import terminal

ROOT = Path(__file__).resolve().parents[1]
CURSOR_UP = "\x1b[A"


def piped(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m tapt ARGV`` with stdout and stderr piped and no ``COLUMNS``."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("COLUMNS", "LINES", "PYTHONPATH")}
    env.update(HF_HUB_OFFLINE="1", NO_COLOR="1")
    done = subprocess.run([sys.executable, "-m", "tapt", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done


@pytest.fixture(scope="module")
def long_model(tiny_bert_path, tmp_path_factory) -> Path:
    """The tiny model under a path long enough to make the metrics table wider than 80."""
    import shutil

    target = tmp_path_factory.mktemp("m") / ("a-model-folder-with-a-rather-long-name-" * 2)
    shutil.copytree(tiny_bert_path, target)
    return target


@pytest.fixture(scope="module")
def evaluated(long_model, tiny_beir_path, tmp_path_factory) -> subprocess.CompletedProcess:
    return piped(["eval", "--model", str(long_model), "--data", str(tiny_beir_path),
                  "--split", "test"], tmp_path_factory.mktemp("run"))


def test_no_cursor_up_codes_from_nested_progress_bars(evaluated):
    assert CURSOR_UP not in evaluated.stdout + evaluated.stderr
    assert "encode corpus" not in evaluated.stderr  # tapt's bars: only on a terminal


def test_tables_are_not_cut_when_piped(evaluated, long_model):
    assert "…" not in evaluated.stdout
    assert str(long_model) in evaluated.stdout  # the system column holds the whole path
    widths = [len(line) for line in evaluated.stdout.splitlines() if "│" in line]
    assert max(widths) > 80


def test_whole_numbers_are_printed_as_integers(evaluated):
    row = next(line for line in evaluated.stdout.splitlines() if "corpus_tokens" in line)
    assert re.search(r"│\s+[\d,]+\s+│$", row.rstrip()), row
    assert ".000" not in row


def test_quiet_prints_no_progress_bars_and_no_info_lines(tiny_beir_path, tmp_path):
    done = piped(["bm25", "--data", str(tiny_beir_path), "--split", "test", "--quiet"],
                 tmp_path)
    assert "INFO" not in done.stdout + done.stderr
    assert "relevance rule" not in done.stdout  # the loader's info line
    assert "%|" not in done.stderr and "it/s" not in done.stderr
    assert "binary_ndcg@10" in done.stdout  # the results still print
    loud = piped(["bm25", "--data", str(tiny_beir_path), "--split", "test"], tmp_path)
    assert "relevance rule" in loud.stdout


def test_number_cells():
    assert terminal.number(1643.0) == "1,643"
    assert terminal.number(0.0) == "0"
    assert terminal.number(True) == "1"
    assert terminal.number(12) == "12"
    assert terminal.number(2219.2141) == "2,219.214"


def test_console_width_when_piped(monkeypatch):
    class Pipe:
        def isatty(self):
            return False

    class Tty(Pipe):
        def isatty(self):
            return True

    monkeypatch.delenv("COLUMNS", raising=False)
    assert terminal.console_width(Pipe()) == terminal.PIPED_WIDTH > 80
    assert terminal.console_width(Tty()) is None  # rich measures the terminal
    monkeypatch.setenv("COLUMNS", "120")
    assert terminal.console_width(Pipe()) is None  # rich reads COLUMNS
