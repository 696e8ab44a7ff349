"""Run one hostile input or fault through tapt, classify what happened and record it.

The reliability report (``docs/reliability.md``, rendered by ``scripts/reliability_report.py``)
is made of the rows these helpers record. A case runs a reader through its public function
(:meth:`Case.api`) or through the command line (:meth:`Case.cli`) under a hard timeout and
classifies the result:

- ``accepted``: it returned (exit code 0 for the CLI);
- ``refused``: tapt raised its own error (``DataError``, ``RecipeError``, or an exception a
  ``raise`` statement inside the ``tapt`` package made), or the CLI exited with code 2 and
  printed ``error: ...``;
- ``traceback``: an exception from inside a library (or an implicit one, e.g. a
  ``KeyError``) reached the caller, or escaped ``tapt.cli.main``;
- ``library error``: ``tapt.cli.main`` exited with code 2, but the error it printed came
  from inside a library (a message that names no file, line or field);
- ``hang``: it ran past the timeout;
- ``exit N``: the CLI exited with another code.

Files that appear or change under the watched folders while a refused case runs are
*partial outputs* (a command that fails must write nothing).

Rows are appended, one JSON object per line, to the file named by the environment
variable ``TAPT_RELIABILITY_JSON`` (nothing is written when it is unset), so a pytest run
that crashes still leaves every row recorded so far. Other suites add rows with the
``reliability_case`` fixture (see ``conftest.py``) or ``Case.record``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import tapt
from tapt.data.beir import DataError
from tapt.recipe import RecipeError

REPORT_ENV = "TAPT_RELIABILITY_JSON"
TAPT_DIR = Path(tapt.__file__).resolve().parent
DEFAULT_TIMEOUT_S = 20.0
OWN_ERRORS = (DataError, RecipeError)


class CaseTimeout(BaseException):
    """Raised by the alarm when a case runs past its timeout (a BaseException, so that no
    ``except Exception`` inside tapt can swallow it)."""


@contextlib.contextmanager
def hard_timeout(seconds: float) -> Iterator[None]:
    """Raise :class:`CaseTimeout` in the main thread after ``seconds`` (SIGALRM; also
    interrupts blocking system calls such as opening a FIFO)."""
    def _alarm(signum, frame):
        raise CaseTimeout(f"no answer after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def raised_by_tapt(err: BaseException) -> bool:
    """True for tapt's own errors: a DataError/RecipeError, or an exception whose innermost
    frame is a ``raise`` statement inside the tapt package."""
    if isinstance(err, OWN_ERRORS):
        return True
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return False
    last = frames[-1]
    try:
        inside = Path(last.filename).resolve().is_relative_to(TAPT_DIR)
    except OSError:
        return False
    return inside and (last.line or "").lstrip().startswith("raise")


def classify(err: BaseException | None) -> str:
    if err is None:
        return "accepted"
    if isinstance(err, CaseTimeout):
        return "hang"
    return "refused" if raised_by_tapt(err) else "traceback"


def first_line(text: str, limit: int = 240) -> str:
    line = next((part.strip() for part in str(text).splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[:limit - 1] + "…"


def snapshot(folders: Iterable[Path]) -> dict[str, tuple[int, int]]:
    """Every path under ``folders`` with its size and modification time."""
    seen: dict[str, tuple[int, int]] = {}
    for folder in folders:
        folder = Path(folder)
        if not folder.exists():
            continue
        for dirpath, dirnames, filenames in os.walk(folder):  # does not follow symlinks
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                try:
                    info = path.lstat()
                except OSError:
                    continue
                seen[str(path)] = (info.st_size, info.st_mtime_ns)
    return seen


@dataclass
class Outcome:
    """What one run of a case did."""

    via: str
    kind: str
    message: str = ""
    error: BaseException | None = None
    exit_code: int | None = None
    printed: str = ""
    partial_outputs: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def assert_accepted(self) -> Outcome:
        assert self.kind == "accepted", (
            f"{self.via}: expected the input to be accepted, got {self.kind}: {self.message}"
            + self._trace())
        return self

    def assert_refused(self, path: str | os.PathLike | None = None, line: int | None = None,
                       field: str | None = None, *, contains: str | None = None) -> Outcome:
        """tapt's own error, naming ``path`` (and ``path:line`` and the field when given),
        and nothing written."""
        assert self.kind == "refused", (
            f"{self.via}: expected tapt's own error, got {self.kind}: {self.message}"
            + self._trace())
        text = self.message if self.exit_code is None else self.printed
        if path is not None:
            where = f"{path}:{line}:" if line is not None else f"{path}"
            assert where in text, f"{self.via}: the error does not name {where!r}: {text}"
        if field is not None:
            assert field in text, (
                f"{self.via}: the error does not name the field {field!r}: {text}")
        if contains is not None:
            assert contains in text, f"{self.via}: {contains!r} not in {text!r}"
        if isinstance(self.error, DataError):
            if path is not None:
                assert self.error.path == str(path)
            if line is not None:
                assert self.error.line == line, (self.error.line, line, text)
            if field is not None:
                assert self.error.field == field, (self.error.field, field, text)
        assert not self.partial_outputs, f"{self.via}: partial outputs {self.partial_outputs}"
        return self

    def _trace(self) -> str:
        if self.error is None or self.kind == "refused":
            return ""
        return "\n" + "".join(traceback.format_exception(self.error))[-3000:]


@dataclass
class Case:
    """One hostile input (or fault) given to one reader; see the module docstring."""

    reader: str
    hostile: str
    expected: str = "refused"
    area: str = "hostile input"
    node: str = ""
    tmp: str = ""
    outcomes: list[Outcome] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    """For property cases: outcome -> number of generated inputs."""
    notes: list[str] = field(default_factory=list)
    passed: bool | None = None

    # -- running -------------------------------------------------------------------------

    def api(self, function: Callable, *args, timeout: float = DEFAULT_TIMEOUT_S,
            watch: Iterable[Path] = (), via: str | None = None, **kwargs) -> Outcome:
        """Call ``function(*args, **kwargs)`` under a timeout and classify the result."""
        label = via or f"API {getattr(function, '__name__', 'call')}"
        before = snapshot(watch)
        start = time.perf_counter()
        err = None
        try:
            with hard_timeout(timeout):
                function(*args, **kwargs)
        except CaseTimeout as caught:
            err = caught
        except Exception as caught:  # noqa: BLE001 - classifying is the point
            err = caught
        outcome = Outcome(via=label, kind=classify(err), error=err,
                          message="" if err is None else f"{type(err).__name__}: {err}",
                          seconds=time.perf_counter() - start)
        if outcome.kind != "accepted":
            outcome.partial_outputs = self._changes(before, snapshot(watch))
        self.outcomes.append(outcome)
        return outcome

    def cli(self, argv: list[str], capsys, *, timeout: float = DEFAULT_TIMEOUT_S,
            watch: Iterable[Path] = (), must_not_exist: Iterable[Path] = ()) -> Outcome:
        """``tapt.cli.main(argv)`` under a timeout; exit 0 is accepted, exit 2 with an
        ``error:`` line refused; ``must_not_exist`` are output paths checked after a
        refusal (with every new or changed file under ``watch``)."""
        from tapt import cli

        label = "CLI tapt " + " ".join(argv[:2] if argv[0] == "data" else argv[:1])
        watch = list(watch)
        before = snapshot(watch)
        start = time.perf_counter()
        capsys.readouterr()
        err, code, handled = None, None, []
        command = next((a for a in argv if a in cli.COMMANDS), None)
        original = cli.COMMANDS.get(command)

        def spy(args):  # sees the exception main() turns into an exit code
            try:
                return original(args)
            except Exception as caught:
                handled.append(caught)
                raise

        if original is not None:
            cli.COMMANDS[command] = spy
        try:
            with hard_timeout(timeout):
                code = cli.main(argv)
        except SystemExit as caught:  # argparse
            code = caught.code if isinstance(caught.code, int) else 2
        except CaseTimeout as caught:
            err = caught
        except Exception as caught:  # noqa: BLE001
            err = caught
        finally:
            if original is not None:
                cli.COMMANDS[command] = original
        captured = capsys.readouterr()
        printed = captured.out + captured.err
        shown = first_line(next((line for line in printed.splitlines() if "error" in line),
                                printed), 400)
        if err is not None:
            kind, message = ("hang" if isinstance(err, CaseTimeout) else "traceback",
                             f"{type(err).__name__}: {err}")
        elif code == 0:
            kind, message = "accepted", ""
        elif code == 2 and handled and not raised_by_tapt(handled[-1]):
            # main() printed it, but the error came from inside a library, not from tapt
            kind, message, err = "library error", shown, handled[-1]
        elif code == 2 and "error" in printed:
            kind, message = "refused", shown
        else:
            kind, message = f"exit {code}", first_line(printed, 400)
        outcome = Outcome(via=label, kind=kind, message=message, error=err, exit_code=code,
                          printed=printed, seconds=time.perf_counter() - start)
        if kind != "accepted":
            changed = self._changes(before, snapshot(watch))
            changed += [str(p) for p in must_not_exist
                        if Path(p).exists() and str(p) not in changed]
            outcome.partial_outputs = changed
        self.outcomes.append(outcome)
        return outcome

    def sample(self, function: Callable, *args, timeout: float = 10.0, **kwargs) -> str:
        """One generated input (property tests): classify, count, and fail on a traceback
        or a hang (so hypothesis shrinks it)."""
        err = None
        try:
            with hard_timeout(timeout):
                function(*args, **kwargs)
        except CaseTimeout as caught:
            err = caught
        except Exception as caught:  # noqa: BLE001
            err = caught
        kind = classify(err)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if kind in ("traceback", "hang"):
            raise AssertionError(f"{kind}: {type(err).__name__}: {err}\n"
                                 + "".join(traceback.format_exception(err))[-3000:])
        return kind

    def record(self, outcome: str, *, via: str = "test", message: str = "",
               partial_outputs: Iterable[str] = ()) -> None:
        """Add a row by hand (faults that are not a single call: crash and resume, a full
        disk, a secret in a file...). ``outcome`` is free text such as ``refused``,
        ``recovered`` or ``accepted``; ``traceback`` and ``hang`` count as failures."""
        self.outcomes.append(Outcome(via=via, kind=outcome, message=message,
                                     partial_outputs=list(partial_outputs)))

    @staticmethod
    def _changes(before: dict, after: dict) -> list[str]:
        return sorted(path for path, stamp in after.items() if before.get(path) != stamp)

    # -- recording -----------------------------------------------------------------------

    def rows(self) -> list[dict]:
        def clean(text: str) -> str:
            text = first_line(text, 400)
            return text.replace(self.tmp, "<tmp>") if self.tmp else text

        rows = []
        for outcome in self.outcomes:
            rows.append({
                "area": self.area, "reader": self.reader, "input": self.hostile,
                "expected": self.expected, "via": outcome.via, "outcome": outcome.kind,
                "exit_code": outcome.exit_code, "message": clean(outcome.message),
                "partial_outputs": [clean(p) for p in outcome.partial_outputs],
                "seconds": round(outcome.seconds, 3), "test": self.node,
                "passed": self.passed, "notes": self.notes})
        if self.counts:
            rows.append({
                "area": self.area, "reader": self.reader, "input": self.hostile,
                "expected": self.expected, "via": "hypothesis",
                "outcome": "property", "counts": dict(sorted(self.counts.items())),
                "exit_code": None, "message": "", "partial_outputs": [], "seconds": 0.0,
                "test": self.node, "passed": self.passed, "notes": self.notes})
        return rows


def write_rows(rows: list[dict]) -> None:
    """Append rows to ``$TAPT_RELIABILITY_JSON`` (JSON lines); no-op when it is unset."""
    target = os.environ.get(REPORT_ENV)
    if not target or not rows:
        return
    with open(target, "a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row, ensure_ascii=False, default=str) + "\n" for row in rows)
