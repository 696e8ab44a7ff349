#!/usr/bin/env python
"""Run the robustness tests and render docs/reliability.md from what they recorded.

    .venv/bin/python scripts/reliability_report.py            # run tests/robustness, write the doc
    .venv/bin/python scripts/reliability_report.py --check    # also exit 1 on any traceback,
                                                              # hang, partial output or failed test
    .venv/bin/python scripts/reliability_report.py --from-json rows.jsonl   # render only
    .venv/bin/python scripts/reliability_report.py tests/robustness/test_x.py  # other test paths
    .venv/bin/python scripts/reliability_report.py --fuzz 10  # also run benchmarks/fuzz_readers.py
                                                              # (10 s of mutations per reader)

The tests record one JSON row per case and way in (the ``reliability_case`` fixture and the
``reliability`` marker of ``tests/robustness/conftest.py``) into the file named by
``TAPT_RELIABILITY_JSON``; this script sets it, runs pytest, and renders the rows grouped by
area (hostile input, crash safety, disk space, secrets...) and reader.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TESTS = ["tests/robustness"]
FAILURES = ("traceback", "hang", "library error")
AREA_ORDER = ["hostile input", "crash safety", "disk space", "secrets"]

DECISIONS = """\
## What counts as valid

| input | decision |
|---|---|
| UTF-8 byte-order mark at the start of a file (JSONL, TSV, TXT, YAML, result JSON) | accepted, skipped: Windows editors write it |
| CRLF line ends | accepted everywhere (the CR is not part of any value) |
| a UTF-8 BOM at the start of a later line | refused: two files were concatenated |
| CR-only line ends, or a lone CR inside a line | refused (classic Mac files; the line would hide several records) |
| UTF-16 / UTF-32 (with or without a BOM), Latin-1 bytes, gzip or other binary | refused: "not valid UTF-8", "UTF-16 or UTF-32 text", or "NUL byte" naming the line |
| a NUL byte anywhere in a line-based file | refused (binary data or UTF-16 without a BOM) |
| a line longer than 32 MiB (`tapt.data.beir.MAX_LINE_BYTES`) | refused without reading further: memory stays bounded on a file with no line ends |
| a recipe larger than 1 MiB (`tapt.recipe.MAX_RECIPE_BYTES`) | refused before parsing (PyYAML would take minutes) |
| ids (corpus and query `_id`, qrels `query-id` / `corpus-id`, mined-negatives ids) with whitespace of any kind (a space, a tab, U+00A0, U+3000: `str.isspace` or Unicode category Z*) or a control or format character (category C*: newline, CR, NUL, zero-width space, bidi marks) | refused at load with file:line (`tapt.util.ids.id_problem`, one rule for every reader; `write_beir` and the TREC run writer refuse them too): an id must be one token of a TSV cell and of a TREC run line, which trec_eval splits on whitespace. Non-ASCII letters (`d-é`, `α1`) are fine; spaces around a qrels cell are trimmed |
| lone UTF-16 surrogates (`"\\ud800"`) in any string | refused: they cannot be written back as UTF-8 nor tokenized |
| an integer `_id` | accepted as its decimal string (public BEIR sets have them) |
| a JSON object with a key twice, a YAML mapping with a key twice | accepted, the last one wins (as every JSON/YAML parser does) |
| qrels scores | integers in [-1000, 1000] (`tapt.data.beir.MAX_GRADE`); negative = judged non-relevant as in TREC; NaN, inf, floats, words refused |
| a CSV-style quoted cell in qrels (`"q1"`) | accepted and unquoted, as BEIR's own loader does |
| NaN / inf / 400-digit numbers as mined `rank` / `score` | refused; negative scores accepted (cosine) |
| NaN / inf in a recipe's numbers (`.inf`, `1e999`, `epochs=inf`) | refused by the schema |
| result-file metrics | numbers in [0, 1]; NaN, inf, negative, strings, booleans refused |
| a cut last line of a run's `metrics.jsonl` | accepted with a warning (a crash while appending); a cut line elsewhere is refused |
"""

ADDING_ROWS = """\
## Adding rows (crash safety, disk space, secrets, ...)

Put the test module in `tests/robustness/` and either

- use the `reliability_case` fixture:
  `case = reliability_case("run folder", "SIGKILL while saving a checkpoint", expected="recovered", area="crash safety")`,
  then `case.api(function, *args)` or `case.cli([...], capsys, must_not_exist=[...])` (run under a hard
  timeout and classified: accepted / refused / traceback / hang, partial outputs checked), or
  `case.record("recovered", message="resumed from checkpoint-20")` for a fault that is not a single call; or
- mark the test `@pytest.mark.reliability("disk space", "disk full while exporting", "refused, no final/")`:
  its row reads `as documented` when it passes and `FAILED` when it does not.

Then run `scripts/reliability_report.py` (it runs `tests/robustness`). Rows are grouped by
`area`, each area under its own heading above. A test that must live elsewhere can record
rows itself: build a `robustness.reliability.Case`, run it, and call
`robustness.reliability.write_rows(case.rows())`, then pass its path to the script.
"""


def run_tests(paths: list[str], rows_file: Path) -> str:
    env = {**os.environ, "TAPT_RELIABILITY_JSON": str(rows_file), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *paths]
    print("running:", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)
    tail = done.stdout.strip().splitlines()
    print("\n".join(tail[-15:]))
    summary = next((line for line in reversed(tail) if re.search(r"\d+ (passed|failed)", line)),
                   f"pytest exited with code {done.returncode}")
    return summary.strip("= ")


def run_fuzz(seconds: float) -> tuple[str, bool]:
    """The table printed by benchmarks/fuzz_readers.py, and whether it found a failure."""
    command = [sys.executable, str(ROOT / "benchmarks" / "fuzz_readers.py"), "--seconds",
               str(seconds)]
    print("running:", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    table = [line for line in done.stdout.splitlines() if line.startswith("|")]
    last = next((line for line in reversed(done.stdout.splitlines()) if "failure" in line), "")
    print("\n".join(table + [last]))
    text = "\n".join([
        "## Bounded fuzzing (`benchmarks/fuzz_readers.py`, not in CI)", "",
        (f"Run by this script with `--seconds {seconds:g}`: the hostile catalogue, one 100 MB "
         "single line, every truncation point of the valid file and random mutations per "
         "reader, each under a timeout. Peak memory is the growth of a forked child that "
         "reads the 100 MB line (for overrides it includes the harness's own 100 MB string)."),
        "", *table, "", f"Result: {last or done.returncode}.", ""])
    return text, done.returncode != 0


def load_rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def is_failure(row: dict) -> bool:
    return (row["outcome"] in FAILURES or row["outcome"].startswith("exit ")
            or row["outcome"] == "FAILED" or bool(row.get("partial_outputs"))
            or row.get("passed") is False)


def grouped(rows: list[dict]) -> dict[str, dict[str, dict[str, list[dict]]]]:
    """area -> reader -> input -> rows, in first-seen order."""
    out: dict[str, dict[str, dict[str, list[dict]]]] = {}
    for row in rows:
        out.setdefault(row["area"], {}).setdefault(row["reader"] or "-", {}).setdefault(
            row["input"], []).append(row)
    return out


def outcome_text(rows: list[dict]) -> str:
    """``refused: load_data, tapt data validate → 2`` (one entry per way in)."""
    by_kind: dict[str, list[str]] = {}
    for row in rows:
        if row["outcome"] == "property":
            counts = row.get("counts", {})
            detail = ", ".join(f"{n} {k}" for k, n in counts.items())
            by_kind.setdefault(f"{sum(counts.values())} generated inputs", []).append(detail)
            continue
        via = row["via"].replace("API ", "").replace("CLI ", "")
        if row.get("exit_code") is not None:
            via += f" → {row['exit_code']}"
        kind = row["outcome"] if not row.get("partial_outputs") else \
            f"{row['outcome']} + PARTIAL OUTPUT {row['partial_outputs']}"
        by_kind.setdefault(kind, []).append(via)
    text = "; ".join(f"**{kind}**: {', '.join(vias)}" if kind in FAILURES else
                     f"{kind}: {', '.join(vias)}" for kind, vias in by_kind.items())
    failed = any(r.get("passed") is False for r in rows)
    return text + (" — **test failed**" if failed else "")


def message_text(rows: list[dict]) -> str:
    for row in rows:  # prefer the library-level message: it carries the exception type
        if row.get("message") and row["via"].startswith("API"):
            return row["message"]
    return next((row["message"] for row in rows if row.get("message")), "")


def render(rows: list[dict], pytest_summary: str, sources: list[str], fuzz: str = "") -> str:
    cases = {(r["area"], r["reader"], r["input"]) for r in rows}
    calls = [r for r in rows if r["outcome"] != "property"]
    generated = sum(sum(r.get("counts", {}).values()) for r in rows if r["outcome"] == "property")
    kinds = Counter(r["outcome"] for r in calls)
    for r in rows:
        for kind, n in r.get("counts", {}).items():
            kinds[f"{kind} (generated)"] += n
    tracebacks = kinds["traceback"] + kinds["traceback (generated)"]
    hangs = kinds["hang"] + kinds["hang (generated)"]
    partial = sum(1 for r in rows if r.get("partial_outputs"))
    other = sum(n for kind, n in kinds.items() if kind not in ("accepted", "refused")
                and kind not in FAILURES and "(generated)" not in kind)
    failed_tests = len({r["test"] for r in rows if r.get("passed") is False})
    today = datetime.date.today().isoformat()
    lines = [
        "# Reliability: hostile inputs and faults",
        "",
        (f"Generated by `scripts/reliability_report.py` on {today} from "
         f"`{' '.join(sources)}` ({pytest_summary}). Do not edit by hand: change the tests "
         "and run the script again."),
        "",
        ("Every reader of tapt (BEIR corpus, queries and qrels; recipes and `key=value` "
         "overrides; mined-negatives files; DAPT passage files; result files read by `tapt "
         "compare` and `tapt report`) was fed hostile inputs through its public function "
         "(API) and through the command line (CLI: `tapt.cli.main`, exit code 2 for input "
         "errors). Each run has a hard timeout (SIGALRM); a refusal must be tapt's own error "
         "naming the file (and the line and field where there is one); after a refusal the "
         "command's output paths and the whole working folder are checked for partial "
         "outputs."),
        "",
        "## Summary",
        "",
        "| | count |",
        "|---|---:|",
        f"| hostile inputs and faults (distinct cases) | {len(cases)} |",
        f"| runs of a case (API and CLI) | {len(calls)} |",
        f"| generated inputs (hypothesis properties) | {generated} |",
        f"| accepted (valid) | {kinds['accepted'] + kinds['accepted (generated)']} |",
        f"| refused with tapt's own error | {kinds['refused'] + kinds['refused (generated)']} |",
        f"| other outcomes (faults: recovered, as documented, ...) | {other} |",
        f"| **tracebacks from inside a library** | **{tracebacks}** |",
        f"| **library messages behind exit code 2** | **{kinds['library error']}** |",
        f"| **hangs (past the timeout)** | **{hangs}** |",
        f"| **partial outputs after a refusal** | **{partial}** |",
        f"| **failed tests** | **{failed_tests}** |",
        "",
        ("The 100 MB single line, every truncation point of each valid file and random "
         "mutations are tried by `benchmarks/fuzz_readers.py` (bounded, not in CI); CI "
         "proves the line limit with a 4 KiB limit and a 5 KB line."),
        "",
        DECISIONS,
    ]
    groups = grouped(rows)
    areas = [a for a in AREA_ORDER if a in groups] + [a for a in groups if a not in AREA_ORDER]
    for area in areas:
        lines += [f"## {area[0].upper() + area[1:]}", ""]
        for reader, by_input in groups[area].items():
            if reader == "-":  # faults recorded by a marked test: the test is the evidence
                lines += ["| fault | what tapt does (asserted) | result | test |",
                          "|---|---|---|---|"]
                for fault, case_rows in by_input.items():
                    row = case_rows[0]
                    result = "passed" if all(r["passed"] for r in case_rows) else "FAILED"
                    lines.append(f"| {cell(fault)} | {cell(row['expected'])} | {result} | "
                                 f"`{cell(row['test'])}` |")
                lines.append("")
                continue
            lines += [f"### {reader}", "", "| input / fault | expected | what tapt did | message |",
                      "|---|---|---|---|"]
            for hostile, case_rows in by_input.items():
                lines.append(f"| {cell(hostile)} | {cell(case_rows[0]['expected'])} | "
                             f"{cell(outcome_text(case_rows))} | "
                             f"{cell(message_text(case_rows))} |")
            lines.append("")
    if fuzz:
        lines.append(fuzz)
    for area in ("crash safety", "disk space", "secrets"):
        if area not in groups:
            lines += [f"## {area[0].upper() + area[1:]}", "",
                      "No rows yet: the tests of this area add theirs as described below.", ""]
    lines.append(ADDING_ROWS)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="test paths (default: tests/robustness)")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "reliability.md")
    parser.add_argument("--from-json", type=Path, default=None,
                        help="render these recorded rows instead of running the tests")
    parser.add_argument("--keep-json", type=Path, default=None,
                        help="also keep the recorded rows (JSON lines) here")
    parser.add_argument("--fuzz", type=float, default=None, metavar="SECONDS",
                        help="also run benchmarks/fuzz_readers.py with this many seconds of "
                             "mutations per reader and add its table")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if any traceback, hang, partial output or failed test")
    args = parser.parse_args(argv)
    sources = args.paths or DEFAULT_TESTS
    if args.from_json:
        rows, summary = load_rows(args.from_json), f"rows from {args.from_json.name}"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            rows_file = Path(tmp) / "rows.jsonl"
            summary = run_tests(sources, rows_file)
            rows = load_rows(rows_file)
            if args.keep_json:
                args.keep_json.write_text(rows_file.read_text(encoding="utf-8")
                                          if rows_file.is_file() else "", encoding="utf-8")
    if not rows:
        print("no rows were recorded", file=sys.stderr)
        return 1
    fuzz, fuzz_failed = run_fuzz(args.fuzz) if args.fuzz is not None else ("", False)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render(rows, summary, sources, fuzz), encoding="utf-8")
    bad = [r for r in rows if is_failure(r)]
    print(f"{len(rows)} rows, {len(bad)} failing; written to {args.output}")
    for row in bad[:20]:
        print(f"  {row['reader']} | {row['input']} | {row['via']} | {row['outcome']} | "
              f"{row.get('message', '')[:120]}")
    return 1 if args.check and (bad or fuzz_failed or "failed" in summary) else 0


if __name__ == "__main__":
    sys.exit(main())
