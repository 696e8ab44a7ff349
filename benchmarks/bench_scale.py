"""Peak memory and throughput of ``tapt eval`` at 10k, 100k and 1M passages.

Measures the pipeline, not the model: generated passages with FormBench's length
distribution (lognormal, median ~5,800 characters, ~1,300 tokens) and a tiny random model
(1-layer BERT, hidden 16, one head, 2,048 positions, a WordPiece tokenizer trained here,
then a Dense layer to 1,024 dimensions so the index is N x 1,024 as for a real model).
Each size runs the real ``tapt eval`` in a child process whose ``/proc/PID/status`` is
sampled: peak RSS split into anonymous memory (what the process owns) and file-backed
pages (the memory-mapped Arrow corpus: page cache the kernel can reclaim), and passages/s.

Generated data go under ``--folder`` (default /tmp/tapt-bench-scale), streamed to disk
(never all in RAM) and reused when present. The 1M case takes about an hour on two cores;
CI never runs it. Usage::

    python benchmarks/bench_scale.py --sizes 10000 100000
    python benchmarks/bench_scale.py --sizes 100000 --warm-cache   # + cache cold and warm
    nice -n 10 python benchmarks/bench_scale.py --sizes 1000000 --memory-up-to 0
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from arm_records import StoredFileError, read_json, read_number

from tapt.analysis.result_files import read_result

MEDIAN_CHARS = 5800
SIGMA = 0.45
"""Lognormal spread of the passage length (FormBench's chunks: most 2k-15k characters)."""
CHUNKS_PER_PATENT = 8
GIB = 2**30


def passage_id(index: int) -> str:
    """``PATENT:CHUNK``, as FormBench's ids."""
    return f"US{10_000_000 + index // CHUNKS_PER_PATENT}:{index % CHUNKS_PER_PATENT}"


def word_pool(rng: np.random.Generator, words: int = 4_000_000) -> str:
    """Formulation-like text: Zipf-distributed made-up words, numbers and punctuation."""
    syllables = ["al", "an", "ar", "ca", "ce", "di", "el", "en", "er", "et", "hy", "ic", "in",
                 "ly", "ma", "mo", "ne", "ol", "on", "or", "ox", "po", "ra", "ro", "si", "ta",
                 "te", "ur", "yl", "xy", "gel", "cel", "lose", "ate", "ide", "ium"]
    vocab = ["".join(rng.choice(syllables, size=rng.integers(1, 5))) for _ in range(30_000)]
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    picks = rng.choice(len(vocab), size=words, p=weights / weights.sum())
    tokens = [vocab[i] for i in picks]
    for spot in rng.choice(words, size=words // 12, replace=False):  # "2.5 wt%"
        tokens[spot] = f"{rng.integers(0, 100)}.{rng.integers(0, 10)} wt%"
    for spot in rng.choice(words, size=words // 12, replace=False):
        tokens[spot] += rng.choice([",", ";", ".", ")"])
    return " ".join(tokens)


def generate(folder: Path, size: int, queries: int, seed: int = 0) -> Path:
    """A BEIR folder of ``size`` passages and ``queries`` queries with FormBench-style
    graded qrels (one anchor 3, two hard 2, two soft 1), written as it is generated."""
    done = folder / ".complete"
    if done.is_file():
        return folder
    rng = np.random.default_rng(seed)
    pool = word_pool(rng)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    queries = min(queries, size // 5)
    judged = rng.choice(size, size=(queries, 5), replace=False)
    anchors = {int(row[0]): q for q, row in enumerate(judged)}
    query_texts: dict[int, str] = {}
    lengths = np.clip(rng.lognormal(math.log(MEDIAN_CHARS), SIGMA, size), 200, 40_000)
    starts = rng.integers(0, len(pool) - 40_001, size)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for index in range(size):
            start = pool.find(" ", int(starts[index])) + 1
            text = pool[start:start + int(lengths[index])].strip()
            if index in anchors:
                words = text.split()
                first = int(rng.integers(0, max(1, len(words) - 20)))
                query_texts[anchors[index]] = " ".join(words[first:first + 20])
            pid = passage_id(index)
            handle.write(json.dumps({"_id": pid, "title": pid.split(":")[0], "text": text})
                         + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for q in range(queries):
            handle.write(json.dumps({"_id": f"Q{q:05d}", "text": query_texts[q]}) + "\n")
    with (folder / "qrels" / "test.tsv").open("w", encoding="utf-8") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for q, row in enumerate(judged):
            for doc, grade in zip(row, (3, 2, 2, 1, 1)):
                handle.write(f"Q{q:05d}\t{passage_id(int(doc))}\t{grade}\n")
    done.write_text("ok\n")
    return folder


def build_model(folder: Path, corpus: Path, dim: int, layers: int = 1,
                sample: int = 2000) -> Path:
    """BERT of ``layers`` layers (hidden 16, one head, 2,048 positions) + mean pooling +
    Dense(dim) + Normalize, its WordPiece vocabulary trained on the first passages of
    ``corpus``. ``layers`` 0 leaves embeddings, pooling and the Dense layer: memory is the
    same (it does not depend on the layers), only the attention's compute is gone."""
    if (folder / "modules.json").is_file():
        return folder
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import (
        Dense,
        Normalize,
        Pooling,
        Transformer,
    )
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    with corpus.open(encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for _, line in zip(range(sample), handle)]
    hf_folder = folder.parent / f".{folder.name}-hf"
    hf_folder.mkdir(parents=True, exist_ok=True)
    trainer = BertWordPieceTokenizer(lowercase=True)
    english = "the water and the oil are mixed with a small amount of salt " * 50
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789.,;:%()-/ "  # no word becomes [UNK]
    trainer.train_from_iterator([*texts, english, alphabet], vocab_size=8000,
                                show_progress=False)
    trainer.save_model(str(hf_folder))
    vocab = (hf_folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    tokenizer = BertTokenizerFast(vocab={token: i for i, token in enumerate(vocab)},
                                  do_lower_case=True, model_max_length=2048)
    if len(tokenizer) < 1000:
        raise RuntimeError(f"the trained tokenizer has only {len(tokenizer)} tokens")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=layers,
                        num_attention_heads=1, intermediate_size=32,
                        max_position_embeddings=2048, pad_token_id=tokenizer.pad_token_id)
    BertModel(config).eval().save_pretrained(hf_folder)
    tokenizer.save_pretrained(hf_folder)
    transformer = Transformer(str(hf_folder), max_seq_length=2048)
    model = SentenceTransformer(modules=[
        transformer, Pooling(16, pooling_mode="mean"),
        Dense(16, dim, activation_function=torch.nn.Identity()), Normalize()], device="cpu")
    model.save(str(folder))
    return folder


def read_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile of a process, in bytes ({} once it has exited)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    fields = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            fields[name] = int(value.split()[0]) * 1024
    return fields


def mapped_arrow_bytes(pid: int) -> int:
    """Resident bytes of the process's mappings of ``*.arrow`` files: the corpus pages
    read since the Arrow corpus last released them (``MappedFile``, every 256 MiB)."""
    total, inside = 0, False
    try:
        with open(f"/proc/{pid}/smaps") as handle:
            for line in handle:
                if line[0] in "0123456789abcdef" and "-" in line.split(" ", 1)[0]:
                    inside = line.rstrip().endswith(".arrow")
                elif inside and line.startswith("Rss:"):
                    total += int(line.split()[1]) * 1024
    except OSError:
        return 0
    return total


def run_eval(model: Path, data: Path, store: str, cache: Path, out: Path,
             max_tokens: int, embeddings: Path | None = None) -> dict:
    """One ``tapt eval`` in a child process, its /proc status sampled every 0.2 s (and
    logged every 10 s to ``out`` with ``.samples.jsonl``: a run stopped early still
    shows how memory grew; its stderr goes to ``out`` with ``.log``)."""
    command = [sys.executable, "-m", "tapt", "eval", "--model", str(model), "--data",
               str(data), "--split", "test", "--corpus-store", store, "--corpus-cache",
               str(cache), "--device", "cpu", "--max-tokens-per-batch",
               str(max_tokens), "--output", str(out), "--overwrite", "--quiet",
               *(["--no-cache"] if embeddings is None else ["--cache-dir", str(embeddings)])]
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "TAPT_EMBEDDING_CACHE": "0" if embeddings is None else "1"}
    built = not list(cache.glob("*.arrow"))
    start = time.perf_counter()
    log = out.with_suffix(".log")
    samples = out.with_suffix(".samples.jsonl").open("w")
    with log.open("w") as errors:
        child = subprocess.Popen(command, env=env, stdout=errors, stderr=errors)
        peak = {"VmRSS": 0, "VmHWM": 0, "RssAnon": 0, "RssFile": 0}
        logged = 0.0
        while child.poll() is None:
            status = read_status(child.pid)
            for name, value in status.items():
                peak[name] = max(peak[name], value)
            if status and time.perf_counter() - logged >= 10.0:
                logged = time.perf_counter()
                status["ArrowRss"] = mapped_arrow_bytes(child.pid)
                samples.write(json.dumps({"s": round(logged - start, 1), **status}) + "\n")
                samples.flush()
            time.sleep(0.2)
    samples.close()
    wall = time.perf_counter() - start
    if child.returncode != 0:
        raise RuntimeError(f"tapt eval failed ({child.returncode}):\n"
                           f"{log.read_text()[-3000:]}")
    result = read_result(out)  # checked: the metrics, the evaluated block
    search = result["evaluated"].get("search", {})
    if embeddings is not None:
        store += " + cache " + ("warm" if search.get("passages_from_cache") else "cold")
    return {"store": store, "peak": peak, "wall_s": wall, "arrow_built": built and
            store == "arrow", "timings": result["timings"],
            "passages": result["evaluated"]["corpus_size"],
            "queries": result["evaluated"]["num_queries"],
            "ndcg": result["binary_ndcg@10"]}


def parts(row: dict, data: Path, cache: Path, dim: int) -> dict[str, float]:
    """What each part holds, in GiB (figures from the sizes, not sampled)."""
    from tapt.data.arrow_corpus import CACHED_NAME
    from tapt.encoders.st_inference import BLOCK_TOKENS, TOKENIZE_CHUNK

    passages, tokens = row["passages"], row["timings"].get("corpus_tokens", 0)
    per_text = tokens / max(passages, 1)
    block = min(tokens, BLOCK_TOKENS + TOKENIZE_CHUNK * per_text)
    arrow = sum(path.stat().st_size for path in cache.glob("*.arrow")
                if CACHED_NAME.fullmatch(path.name))  # tapt's cached corpora only
    ids = dict.fromkeys(passage_id(i) for i in range(10_000))
    id_bytes = (sys.getsizeof(ids) + sum(map(sys.getsizeof, ids))) / len(ids) * passages
    return {"corpus.jsonl": (data / "corpus.jsonl").stat().st_size / GIB,
            "arrow file (mapped)": arrow / GIB if row["store"].startswith("arrow") else 0.0,
            "id map": id_bytes / GIB,
            # the block and its concatenation (on a CPU blocks go in order; an
            # accelerator tokenizes the next one ahead: one block more)
            "token ids (blocks)": 2 * 4 * block / GIB,
            "index (float32)": passages * dim * 4 / GIB,
            "query embeddings": row["queries"] * dim * 4 / GIB}


PEAK_FIELDS = ("VmHWM", "RssAnon", "RssFile")


def read_rows(path: Path) -> list[dict]:
    """The rows an earlier ``--json`` run wrote, each checked for what :func:`print_tables`
    reads (counts, a store name, peak bytes, wall seconds, rates, the parts' GiB), or
    :class:`StoredFileError` naming the file, the row and the field."""
    rows = read_json(path, "bench_scale.py --json rows")
    if not isinstance(rows, list) or not rows:
        raise StoredFileError(f"{path}: expected a non-empty list of rows (bench_scale.py "
                              "--json writes one)")
    for number, row in enumerate(rows, 1):
        where = Path(f"{path}: row {number}")
        if not isinstance(row, dict):
            raise StoredFileError(f"{where}: not a JSON object")
        read_number(where, row, "passages", low=1)
        read_number(where, row, "queries")
        read_number(where, row, "wall_s", low=1e-9)
        read_number(where, row, "ndcg", high=1.0)
        if not isinstance(row.get("store"), str) or not isinstance(row.get("arrow_built"),
                                                                   bool):
            raise StoredFileError(f"{where}: fields 'store' (text) and 'arrow_built' "
                                  "(true/false) expected")
        for block, fields in (("peak", PEAK_FIELDS), ("timings", ("passages_per_s",)),
                              ("parts", ())):
            values = row.get(block)
            if not isinstance(values, dict):
                raise StoredFileError(f"{where}: field '{block}': expected an object")
            for field in (*fields, *(name for name in values if name not in fields)):
                read_number(Path(f"{where}: {block}"), values, field)
    return rows


def print_tables(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 150))  # a log file: no 80-column wrap
    table = Table(title="tapt eval: peak memory and throughput (GiB)")
    for name in ("passages", "store", "peak RSS", "peak anon", "peak file", "wall s",
                 "passages/s (wall)", "encode passages/s", "tokens/s", "tokens/passage"):
        table.add_column(name, justify="right")
    for row in rows:
        peak, timings = row["peak"], row["timings"]
        table.add_row(f"{row['passages']:,}", row["store"] + (" (built)" if row["arrow_built"]
                                                               else ""),
                      f"{peak['VmHWM'] / GIB:.2f}", f"{peak['RssAnon'] / GIB:.2f}",
                      f"{peak['RssFile'] / GIB:.2f}", f"{row['wall_s']:,.0f}",
                      f"{row['passages'] / row['wall_s']:,.0f}",
                      f"{timings['passages_per_s']:,.0f}",
                      f"{timings.get('tokens_per_s', 0):,.0f}",
                      f"{timings.get('corpus_tokens', 0) / row['passages']:,.0f}")
    console.print(table)
    held = Table(title="what each part holds (GiB, from the sizes)")
    held.add_column("passages", justify="right")
    held.add_column("store")
    names = list(dict.fromkeys(name for row in rows for name in row["parts"]))
    for name in names:
        held.add_column(name, justify="right")
    for row in rows:  # rows of older runs may lack a part
        held.add_row(f"{row['passages']:,}", row["store"],
                     *(f"{row['parts'][name]:.3f}" if name in row["parts"] else "-"
                       for name in names))
    console.print(held)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--folder", type=Path, default=Path("/tmp/tapt-bench-scale"))
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=1,
                        help="transformer layers of the random model (0: no attention)")
    parser.add_argument("--max-tokens-per-batch", type=int, default=16384)
    parser.add_argument("--memory-up-to", type=int, default=100_000,
                        help="also run --corpus-store memory at sizes up to this (0: never)")
    parser.add_argument("--no-arrow", action="store_true",
                        help="only the --corpus-store memory runs")
    parser.add_argument("--warm-cache", action="store_true",
                        help="after each Arrow run, two more with the embedding cache: cold "
                             "(fills it) and warm (reads it)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--show", type=Path, nargs="+", default=None, metavar="JSON",
                        help="only print the tables of rows written by earlier --json runs")
    args = parser.parse_args(argv)
    if args.show:
        try:
            rows = [row for path in args.show for row in read_rows(path)]
        except StoredFileError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print_tables(rows)
        return 0
    rows = []
    for size in args.sizes:
        started = time.perf_counter()
        data = generate(args.folder / f"beir-{size}", size, args.queries)
        print(f"{size:,} passages ready in {args.folder / f'beir-{size}'} "
              f"({time.perf_counter() - started:,.0f} s)", flush=True)
        model = build_model(args.folder / f"model-{args.dim}-{args.layers}l",
                            data / "corpus.jsonl", args.dim, args.layers)
        stores = ([] if args.no_arrow else ["arrow"]) + (
            ["memory"] if size <= args.memory_up_to else [])
        for store in stores:
            cache = args.folder / f"arrow-{size}"
            cache.mkdir(parents=True, exist_ok=True)
            embeddings = args.folder / f"embeddings-{size}"
            if store == "arrow" and args.warm_cache:
                shutil.rmtree(embeddings, ignore_errors=True)  # the cold run starts empty
            for use_cache in (False, True, True) if store == "arrow" and args.warm_cache \
                    else (False,):
                name = f"eval-{size}-{store}" + ("-cache" if use_cache else "")
                row = run_eval(model, data, store, cache, args.folder / f"{name}.json",
                               args.max_tokens_per_batch, embeddings if use_cache else None)
                row["parts"] = parts(row, data, cache, args.dim)
                rows.append(row)
                print(json.dumps({key: row[key]
                                  for key in ("passages", "store", "peak", "wall_s")}),
                      flush=True)
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=2))
    print_tables(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
