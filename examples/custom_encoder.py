"""Add your own encoder to tapt by subclassing :class:`tapt.Encoder`.

An encoder turns queries and passages into float32 matrices; tapt does the rest (length-
sorted batching, exact FAISS search, pytrec_eval metrics, timings). Implement:

- ``embedding_dim`` (property): the width of the vectors,
- ``encode_queries(texts, batch_size)`` and ``encode_corpus(texts, batch_size)``,
- optionally ``name`` (shown in reports), ``normalize`` (True: cosine, False: raw inner
  product), ``text_length`` (sort key), ``count_tokens`` (for tokens/s) and
  ``encode_stream`` (your own batching: yield ``tapt.encoders.base.EncodedBatch``).

This example needs no model at all: ``HashingEncoder`` hashes words and character
n-grams into a fixed number of buckets (the "hashing trick") with numpy.

Run it on any BEIR folder, e.g. one written by ``tapt data synth``::

    python examples/custom_encoder.py --data path/to/beir --split test
"""

from __future__ import annotations

import argparse
import re
import zlib
from collections.abc import Sequence

import numpy as np

import tapt
from tapt.retrieval.evaluate import metrics_table, timings_table

WORD = re.compile(r"\w+")


class HashingEncoder(tapt.Encoder):
    """Bag of words and character n-grams, hashed into ``dim`` signed buckets.

    Each feature adds ``+-1`` to bucket ``crc32(feature) % dim`` (the sign from another
    hash bit keeps collisions from only adding up); counts are log-scaled. Scores are
    cosine similarities, so ``normalize`` stays True. Deterministic across runs and
    machines (``crc32``, not Python's salted ``hash``).

    Example::

        enc = HashingEncoder(dim=1024)
        enc.encode_queries(["Which thickener is used?"]).shape   # (1, 1024)
    """

    normalize = True

    def __init__(self, dim: int = 2 ** 14, ngram: int = 4, word_weight: float = 2.0) -> None:
        self.dim = dim
        self.ngram = ngram
        self.word_weight = word_weight
        self.name = f"hashing-{dim}"

    @property
    def embedding_dim(self) -> int:
        return self.dim

    def features(self, text: str) -> list[tuple[str, float]]:
        """``(feature, weight)`` pairs: every lower-cased word and its character n-grams."""
        found = []
        for word in WORD.findall(text.lower()):
            found.append((f"w:{word}", self.word_weight))
            padded = f"<{word}>"
            found.extend((f"c:{padded[i:i + self.ngram]}", 1.0)
                         for i in range(max(1, len(padded) - self.ngram + 1)))
        return found

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in self.features(text):
                code = zlib.crc32(feature.encode("utf-8"))
                sign = 1.0 if code & 0x80000000 else -1.0
                out[row, code % self.dim] += sign * weight
        return np.sign(out) * np.log1p(np.abs(out))  # dampen repeated words

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return self._encode(texts)

    def encode_corpus(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return self._encode(texts)

    def count_tokens(self, texts: Sequence[str]) -> int:
        return sum(len(WORD.findall(text)) for text in texts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="local BEIR folder (or a Hub dataset id)")
    parser.add_argument("--split", default="test", choices=("train", "dev", "test"))
    parser.add_argument("--dim", type=int, default=2 ** 14, help="number of hash buckets")
    parser.add_argument("--lenient", action="store_true",
                        help="accept empty passages and queries without an anchor")
    args = parser.parse_args(argv)

    from rich.console import Console

    try:
        dataset = tapt.load_data(args.data, splits=[args.split],
                                 require_anchor=not args.lenient, allow_empty=args.lenient)
    except tapt.DataError as err:
        parser.exit(2, f"error: {err}\n")
    encoder = HashingEncoder(dim=args.dim)
    report = tapt.evaluate(tapt.DenseRetriever(encoder, progress=False), dataset, args.split)

    console = Console()
    console.print(metrics_table({encoder.name: report.metrics},
                                title=f"{args.split}: {report.info['corpus_size']:,} passages, "
                                      f"{report.info['num_queries']:,} queries"))
    console.print(timings_table(report.timings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
