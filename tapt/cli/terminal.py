"""How ``tapt`` commands print: one console (so tests can swap it), its width, and when
progress bars and info lines show.

- Every printed line is redacted (:class:`tapt.util.redaction.RedactingConsole`).
- On a terminal the console takes the terminal's width; piped or redirected (a log, a CI
  job) it takes ``COLUMNS`` when set, else :data:`PIPED_WIDTH`, so tables are not cut
  or wrapped at rich's default of 80 columns.
- Progress bars show only on a terminal and never with ``--quiet``: tqdm's nested bars
  write cursor-up codes (ESC [A) that garble a log.
- A warning prints once per command (:class:`ShownOnce`): a sweep's trials, or a
  comparison's query sets, load the same data and would repeat its warnings.
- Ctrl-C (SIGINT) stops every command the same way, however tapt was started
  (:func:`stop_on_ctrl_c`).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

from tapt.util.redaction import RedactingConsole

PIPED_WIDTH = 200
"""Console width when stdout is not a terminal and ``COLUMNS`` is not set."""


class ShownOnce(logging.Filter):
    """Lets a warning (or error) through the first time its text is seen, drops the repeats
    (counted in :attr:`repeats`); info and debug lines always pass. The standard
    ``warnings`` module's "default" action does this per code location; here it is per
    message, since one location (a data check) warns about each input it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[int, str]] = set()
        self.repeats = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.levelno, record.getMessage())
        if key in self.seen:
            self.repeats += 1
            return False
        self.seen.add(key)
        return True


def stop_on_ctrl_c() -> None:
    """SIGINT raises ``KeyboardInterrupt`` in every command, also when tapt was started
    with SIGINT ignored (``cmd &`` in a script, some schedulers): Python then installs no
    handler, so ``kill -INT`` used to be ignored by ``tapt train`` run that way while a
    sweep started in the foreground stopped. One behaviour: the command stops, prints where
    it can resume and exits 130 (a training run resumes from its last checkpoint). To keep
    a background job immune to a terminal's Ctrl-C, start it in its own session
    (``setsid tapt train ...``). Only the main thread can set a handler; elsewhere (tapt
    called from a worker thread) nothing changes."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def console_width(stream=None) -> int | None:
    """The width to give a rich console writing to ``stream`` (default stdout): None (rich
    measures the terminal, or reads ``COLUMNS``) on a terminal or with ``COLUMNS`` set,
    else :data:`PIPED_WIDTH`."""
    stream = sys.stdout if stream is None else stream
    if os.environ.get("COLUMNS", "").strip().isdigit():
        return None
    try:
        if stream.isatty():
            return None
    except (AttributeError, ValueError):  # a closed or unusual stream
        pass
    return PIPED_WIDTH


def log_console() -> Console:
    """The console of the log handler (stdout, as rich's default), as wide as
    :data:`console`."""
    return Console(width=console_width())


def show_progress(args: argparse.Namespace) -> bool:
    """Whether a command shows progress bars: not with ``--quiet``, and only when stderr
    (where tqdm writes) is a terminal."""
    if getattr(args, "quiet", False):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def hub_bars_off(off: bool) -> Iterator[None]:
    """Inside, when ``off``: no huggingface_hub / transformers progress bars (downloads,
    "Loading weights"); restored afterwards."""
    if not off:
        yield
        return
    from huggingface_hub.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    transformers_logging = None
    if "transformers" in sys.modules:  # imported already: it keeps its own switch
        from transformers.utils import logging as transformers_logging
    was_off = are_progress_bars_disabled()
    was_on = transformers_logging is not None and transformers_logging.is_progress_bar_enabled()
    disable_progress_bars()
    if was_on:
        transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            transformers_logging.enable_progress_bar()  # turns the Hub's on too
        (disable_progress_bars if was_off else enable_progress_bars)()


def number(value: float) -> str:
    """A table cell: whole numbers (token counts, 0/1 flags) as integers, others to three
    decimals, both with thousands separators."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return f"{int(value):,}"
    return f"{value:,.3f}"


def figures_table(figures: dict[str, float], title: str = "Timings"):
    """A rich table of throughput and latency figures, cells by :func:`number`."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in figures.items():
        table.add_row(key, number(value))
    return table


console = RedactingConsole(width=console_width())
