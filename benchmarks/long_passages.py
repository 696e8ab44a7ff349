"""Make a BEIR folder whose passages are at least N tokens long, for speed and memory checks.

FormBench passages have a median of ~1,300 tokens; ``tapt data synth`` writes ~150-token
ones. This copies a BEIR folder (queries and qrels unchanged) and lengthens every passage
by appending the following passages' text until it has ``--tokens`` tokens under the
given model's tokenizer, so that with ``max_seq_length = N`` every passage fills the
window exactly. Relevance is meaningless afterwards: use it for throughput, not quality.

Example::

    python benchmarks/long_passages.py data/synth data/synth-512 --tokens 512 \\
        --tokenizer /tmp/qwen3-random
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path


def lengthen(texts: list[str], count_tokens, target: int) -> list[str]:
    """Each text followed by the next ones (cyclically) until it has ``target`` tokens."""
    lengths = [max(count_tokens(text), 1) for text in texts]
    longer = []
    for index, text in enumerate(texts):
        parts, total, step = [text], lengths[index], 1
        while total < target and step < len(texts):
            following = (index + step) % len(texts)
            parts.append(texts[following])
            total += lengths[following]
            step += 1
        longer.append(" ".join(parts))
    return longer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="BEIR folder to copy")
    parser.add_argument("out", type=Path, help="new BEIR folder (must not exist)")
    parser.add_argument("--tokens", type=int, required=True, help="minimum tokens per passage")
    parser.add_argument("--tokenizer", required=True, help="model folder whose tokenizer counts")
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    from tapt.data.beir import read_corpus
    from tapt.encoders.model_paths import resolve_model_path

    if args.out.exists():
        parser.error(f"{args.out} exists")
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(args.tokenizer))
    corpus = read_corpus(args.source / "corpus.jsonl")
    ids = list(corpus)
    texts = lengthen([corpus[i].text for i in ids],
                     lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]),
                     args.tokens)
    args.out.mkdir(parents=True)
    with (args.out / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for doc_id, text in zip(ids, texts):
            handle.write(json.dumps({"_id": doc_id, "title": corpus[doc_id].title,
                                     "text": text}) + "\n")
    shutil.copy(args.source / "queries.jsonl", args.out / "queries.jsonl")
    shutil.copytree(args.source / "qrels", args.out / "qrels")
    print(f"wrote {args.out}: {len(ids):,} passages of at least {args.tokens} tokens")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
