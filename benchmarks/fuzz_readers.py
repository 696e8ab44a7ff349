"""Bounded fuzzing of every tapt reader (not run in CI).

For each reader (corpus, queries, qrels, mined negatives, DAPT passages .txt/.jsonl,
recipes, recipe overrides, result files) it tries:

1. the hostile catalogue of ``tests/robustness/hostile.py`` (encodings, BOMs, CR/CRLF, NUL,
   truncation, binary, gzip);
2. one single line of ``--big-mb`` MB (default 100): refused at tapt's line limit
   (``MAX_LINE_BYTES``, 32 MiB) or recipe size limit with bounded memory, or read whole
   when valid and unlimited (result files); its time and peak-memory growth are printed;
3. every truncation point (each byte prefix) of the valid file;
4. random mutations (byte flips, nasty tokens, deletions, duplications, line-end changes)
   until ``--seconds`` per reader have passed.

Every input runs under a hard timeout. A library traceback or a hang is a failure: its
input is saved under ``--keep`` (default /tmp/tapt-fuzz-failures) and the exit code is 1.

    .venv/bin/python benchmarks/fuzz_readers.py                  # ~30 s per reader
    .venv/bin/python benchmarks/fuzz_readers.py --seconds 5 --big-mb 10 --only corpus qrels
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from robustness.conftest import (
    CORPUS,
    QUERIES,
    jsonl_lines,
    qrels_lines,
    write_dataset,
)
from robustness.hostile import document_variants, line_variants
from robustness.reliability import CaseTimeout, classify, hard_timeout

import tapt
from tapt.data.beir import read_corpus, read_qrels, read_queries
from tapt.data.mined import read_mined
from tapt.data.passages import read_passage_file
from tapt.recipe import load_recipe

NASTY = [b"\x00", b"\r", b"\r\n", b"\n", b"\t", b'"', b"\\", b"\xef\xbb\xbf", b"\xff\xfe",
         b"\xc3", b"\xe9", b"\xed\xa0\x80", b"NaN", b"Infinity", b"-1", b"1e999", b"9" * 5000,
         b"[" * 5000, b"{", b"}", b"null", b"\\ud800", b"\\u0000", b"*a", b"&a", b"!!python/"]
RECIPE = (b"# fuzzed recipe (\xc3\xa9)\nmodel:\n  name: m\n  lora: {enabled: false, r: 8}\n"
          b"data:\n  path: data/x\ntraining:\n  epochs: 1\n  learning_rate: 2.0e-5\n"
          b"output_dir: runs/x\n")
RESULT = json.dumps({"binary_ndcg@10": 0.5, "graded_ndcg@10": 0.4, "mrr@10": 0.4,
                     "recall@100": 0.9, "timings": {"search_ms_per_query": 0.2},
                     "evaluated": {"model": "bm25", "data": "d/formbench-structured"}},
                    indent=1).encode()


@dataclass
class Target:
    name: str
    suffix: str
    valid: bytes
    read: object
    big_line: object  # (file handle, size in bytes) -> None: writes one huge line
    counts: dict = field(default_factory=dict)
    slowest: float = 0.0
    big: str = ""


def mutate(data: bytes, rng: random.Random) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        at = rng.randint(0, len(data))
        if op == 0 and data:
            data[min(at, len(data) - 1)] = rng.randrange(256)
        elif op == 1:
            data[at:at] = rng.choice(NASTY)
        elif op == 2 and data:
            end = min(len(data), at + rng.randint(1, 40))
            del data[at:end]
        elif op == 3 and data:
            end = min(len(data), at + rng.randint(1, 80))
            data[at:at] = data[at:end] * rng.randint(1, 3)
        elif op == 4:
            data = bytearray(bytes(data).replace(b"\n", rng.choice([b"\r\n", b"\r", b"\n\n"])))
        else:
            data[at:at] = rng.randbytes(rng.randint(1, 16))
    return bytes(data)


def run_one(target: Target, path: Path, data: bytes, keep: Path, label: str) -> str:
    path.write_bytes(data)
    start = time.perf_counter()
    err = None
    try:
        with hard_timeout(10):
            target.read(path)
    except CaseTimeout as caught:
        err = caught
    except Exception as caught:  # noqa: BLE001 - classifying is the point
        err = caught
    seconds = time.perf_counter() - start
    target.slowest = max(target.slowest, seconds)
    kind = classify(err)
    target.counts[kind] = target.counts.get(kind, 0) + 1
    if kind in ("traceback", "hang"):
        keep.mkdir(parents=True, exist_ok=True)
        stem = f"{target.name}-{sum(target.counts.values())}"
        (keep / f"{stem}{target.suffix}").write_bytes(data)
        (keep / f"{stem}.txt").write_text(f"{label}\n" + "".join(
            traceback.format_exception(err)), encoding="utf-8")
        print(f"  {kind.upper()}: {target.name} ({label}) -> {keep / stem}{target.suffix}: "
              f"{type(err).__name__}: {str(err)[:200]}", flush=True)
    return kind


def big_line_case(target: Target, folder: Path, megabytes: int) -> None:
    path = folder / f"big{target.suffix}"
    with path.open("wb") as handle:
        target.big_line(handle, megabytes * 2**20)
    # In a forked child, so that its peak memory is its own (ru_maxrss never goes down).
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        before_kib = pages * os.sysconf("SC_PAGE_SIZE") / 1024
        start = time.perf_counter()
        err = None
        try:
            with hard_timeout(120):
                target.read(path)
        except BaseException as caught:  # noqa: BLE001 - classified below
            err = caught
        report = {"kind": classify(err), "seconds": time.perf_counter() - start,
                  "grown_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                - before_kib) / 1024,
                  "message": "" if err is None else str(err)[:200]}
        os.write(write_end, json.dumps(report).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(child, 0)
    report = json.loads(answer or b'{"kind": "traceback", "seconds": 0, "grown_mib": 0, '
                        b'"message": "the child died"}')
    kind = report["kind"]
    target.counts[kind] = target.counts.get(kind, 0) + 1
    message = report["message"].replace(str(folder), "<tmp>")[:90]
    target.big = (f"{kind} in {report['seconds']:.2f} s, peak memory "
                  f"+{max(0.0, report['grown_mib']):.0f} MiB {message}")
    path.unlink()


def filler(handle, size: int, head: bytes, tail: bytes, byte: bytes = b"a") -> None:
    handle.write(head)
    chunk = byte * 2**20
    left = size
    while left > 0:
        handle.write(chunk[:min(left, len(chunk))])
        left -= len(chunk)
    handle.write(tail)


def targets(folder: Path) -> list[Target]:
    data = write_dataset(folder / "data")
    dataset = tapt.load_data(data)
    mined = jsonl_lines([{"query_id": "q1", "negatives": [{"id": "d2", "rank": 1}]},
                         {"query_id": "q2", "negatives": [{"id": "d4", "score": 0.5}]},
                         {"query_id": "q1x", "negatives": []}])
    mined_ok = b"\n".join(mined[:2]) + b"\n"
    recipe_path = folder / "override-recipe.yaml"
    recipe_path.write_bytes(RECIPE)
    out = [
        Target("corpus", ".jsonl", b"\n".join(jsonl_lines(CORPUS)) + b"\n", read_corpus,
               lambda h, n: filler(h, n, b'{"_id": "x", "text": "', b'"}\n')),
        Target("queries", ".jsonl", b"\n".join(jsonl_lines(QUERIES)) + b"\n", read_queries,
               lambda h, n: filler(h, n, b'{"_id": "q", "text": "', b'"}\n')),
        Target("qrels", ".tsv", b"\n".join(qrels_lines("test")) + b"\n",
               lambda p: read_qrels(p, dataset.corpus, dataset.queries),
               lambda h, n: filler(h, n, b"query-id\tcorpus-id\tscore\nq4\td1\t", b"\n", b"9")),
        Target("mined", ".jsonl", mined_ok, lambda p: read_mined(p, dataset, "train"),
               lambda h, n: filler(h, n, b'{"query_id": "q1", "negatives": [], "x": "',
                                   b'"}\n')),
        Target("passages-txt", ".txt", b"first passage\nsecond passage \xc3\xa9\nthird\n",
               read_passage_file, lambda h, n: filler(h, n, b"", b"\n")),
        Target("passages-jsonl", ".jsonl", b'{"text": "a"}\n{"text": "b", "title": "t"}\n'
               b'{"text": "c \xc3\xa9"}\n', read_passage_file,
               lambda h, n: filler(h, n, b'{"text": "', b'"}\n')),
        Target("recipe", ".yaml", RECIPE, load_recipe,
               lambda h, n: filler(h, n, RECIPE + b"# ", b"\n")),
        Target("override", ".txt", b"training.learning_rate=1e-5",
               lambda p: load_recipe(recipe_path, [p.read_bytes().decode("utf-8", "replace")]),
               lambda h, n: filler(h, n, b"data.path=", b"")),
    ]
    try:
        from tapt.analysis.compare import read_result
    except ImportError:
        print("tapt.analysis.compare not importable: result files skipped")
    else:
        out.append(Target("result", ".json", RESULT, read_result,
                          lambda h, n: filler(h, n, RESULT[:-1] + b', "x": "', b'"}')))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0,
                        help="random mutations per reader (default 30 s)")
    parser.add_argument("--big-mb", type=int, default=100, help="size of the single line")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", default=None, help="reader names to fuzz")
    parser.add_argument("--keep", type=Path, default=Path("/tmp/tapt-fuzz-failures"))
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        chosen = [t for t in targets(folder) if not args.only or t.name in args.only]
        for target in chosen:
            path = folder / f"input{target.suffix}"
            print(f"{target.name}: catalogue, {args.big_mb} MB line, truncations, mutations",
                  flush=True)
            lines = target.valid.rstrip(b"\n").split(b"\n")
            catalogue = (line_variants(lines) if len(lines) >= 3 else {}) | \
                document_variants(target.valid)
            for label, data in catalogue.items():
                run_one(target, path, data, args.keep, label)
            big_line_case(target, folder, args.big_mb)
            for cut in range(len(target.valid) + 1):
                run_one(target, path, target.valid[:cut], args.keep, f"truncated at {cut}")
            deadline = time.monotonic() + args.seconds
            while time.monotonic() < deadline:
                run_one(target, path, mutate(target.valid, rng), args.keep, "mutation")
    failures = 0
    print(f"\n| reader | inputs | accepted | refused | tracebacks | hangs | slowest | "
          f"{args.big_mb} MB single line |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for t in chosen:
        bad = t.counts.get("traceback", 0) + t.counts.get("hang", 0)
        failures += bad
        print(f"| {t.name} | {sum(t.counts.values()):,} | {t.counts.get('accepted', 0):,} | "
              f"{t.counts.get('refused', 0):,} | {t.counts.get('traceback', 0)} | "
              f"{t.counts.get('hang', 0)} | {t.slowest:.2f} s | {t.big} |")
    print(f"\n{failures} failure(s)" + (f"; inputs saved under {args.keep}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
