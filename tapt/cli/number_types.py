"""The argparse number types: every numeric flag of every ``tapt`` command uses one of
:data:`NUMBER_TYPES`, built from :mod:`tapt.util.bounds` (the table of ranges), so
``--batch-size 0``, ``--k1 nan``, ``--k1 1e100`` or ``--rrf-k inf`` stop at parsing with
``argument --k1: must be ...`` and the reason (exit code 2); every flag's help ends with
its range (:class:`tapt.cli.options.HelpFormatter` reads the type's ``bound``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from tapt.util import bounds


def number_type(bound: bounds.Bound, name: str, *, none: str | None = None) -> Callable:
    """An argparse ``type`` for ``bound``; ``none``: a word (e.g. ``none``) that means None."""

    def parse(text: str):
        if none is not None and text.strip().lower() == none:
            return None
        try:
            return bound.parse(text, "value")
        except ValueError:
            extra = f" or '{none}'" if none is not None else ""
            why = f" ({bound.why})" if bound.why else ""
            raise argparse.ArgumentTypeError(
                f"must be {bound.description}{extra}, got {text!r}{why}") from None

    parse.__name__ = name  # argparse names the type in some of its messages
    parse.bound = bound  # type: ignore[attr-defined]
    return parse


positive_int = number_type(bounds.POSITIVE_INT, "positive_int")
non_negative_int = number_type(bounds.NON_NEGATIVE_INT, "non_negative_int")
seed = number_type(bounds.SEED, "seed")
positive_float = number_type(bounds.POSITIVE_FLOAT, "positive_float")
non_negative_float = number_type(bounds.NON_NEGATIVE_FLOAT, "non_negative_float")
fraction = number_type(bounds.FRACTION, "fraction")
open_fraction = number_type(bounds.OPEN_FRACTION, "open_fraction")
margin_or_none = number_type(bounds.MARGIN, "margin_or_none", none="none")
finite_float = number_type(bounds.FINITE_FLOAT, "finite_float")
# The flags' own ranges (tapt.util.bounds' table): an upper end where a dtype or memory ends.
width = number_type(bounds.WIDTH, "width")
sequence_length = number_type(bounds.SEQUENCE_LENGTH, "sequence_length")
tokens_per_batch = number_type(bounds.TOKENS_PER_BATCH, "tokens_per_batch")
batch_size = number_type(bounds.BATCH_SIZE, "batch_size")
top_k = number_type(bounds.TOP_K, "top_k")
skip_top = number_type(bounds.SKIP_TOP, "skip_top")
count = number_type(bounds.COUNT, "count")
positive_count = number_type(bounds.POSITIVE_COUNT, "positive_count")
sample_size = number_type(bounds.SAMPLE, "sample_size")
bm25_k1 = number_type(bounds.BM25_K1, "bm25_k1")
rrf_k = number_type(bounds.RRF_K, "rrf_k")
resamples = number_type(bounds.RESAMPLES, "resamples")
concurrency = number_type(bounds.CONCURRENCY, "concurrency")
rate = number_type(bounds.RATE, "rate")
cache_gb = number_type(bounds.CACHE_GB, "cache_gb")
days = number_type(bounds.DAYS, "days")
synth_queries = number_type(bounds.SYNTH_QUERIES, "synth_queries")
synth_distractors = number_type(bounds.SYNTH_DISTRACTORS, "synth_distractors")
soup_size = number_type(bounds.SOUP_SIZE, "soup_size")
rescore = number_type(bounds.RESCORE, "rescore")
calibration_size = number_type(bounds.CALIBRATION, "calibration_size")
map_sample = number_type(bounds.MAP_SAMPLE, "map_sample")
cases_shown = number_type(bounds.CASES_SHOWN, "cases_shown")
threads = number_type(bounds.THREADS, "threads")
lexical_weight = number_type(bounds.LEXICAL_WEIGHT, "lexical_weight")


def relevant_from(text: str) -> int | str:
    """``--relevant-from``: ``auto`` or a grade in [1, 1000] (``parse_relevant_from``)."""
    from tapt.data.relevance import parse_relevant_from

    try:
        return parse_relevant_from(text.strip().lower())
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


relevant_from.bound = bounds.GRADE  # type: ignore[attr-defined]  (or auto)


def dev_carve_size(text: str) -> int | float:
    """``--dev-from-train``: a number of queries or a fraction in (0, 1), as the recipe's."""
    bound = bounds.DEV_CARVE
    if bounds.is_one_point_zero(text):
        raise argparse.ArgumentTypeError(f"{text!r}: {bounds.ONE_POINT_ZERO}")
    try:
        value = bound.parse(text, "value")
    except ValueError:
        value = None
    if value is None or not (value.is_integer() or value < 1.0):
        raise argparse.ArgumentTypeError(f"must be {bound.description}, got {text!r} "
                                         f"({bound.why})")
    return int(value) if value.is_integer() else value


dev_carve_size.bound = bounds.DEV_CARVE  # type: ignore[attr-defined]


def seed_list(text: str) -> list[int]:
    """``--seeds 0,1,2``: comma-separated seeds, each one a :func:`seed`."""
    return [seed(item.strip()) for item in text.split(",")]


seed_list.bound = bounds.SEED  # type: ignore[attr-defined]  (each seed)


NUMBER_TYPES = (positive_int, non_negative_int, seed, positive_float, non_negative_float,
                fraction, open_fraction, margin_or_none, finite_float, relevant_from,
                seed_list, width, sequence_length, tokens_per_batch, batch_size, top_k,
                skip_top, count, positive_count, sample_size, bm25_k1, rrf_k, resamples,
                concurrency, rate, cache_gb, days, synth_queries, synth_distractors,
                soup_size, rescore, calibration_size, map_sample, cases_shown,
                dev_carve_size, threads, lexical_weight)
"""The only ``type=`` a numeric flag may have (a test walks the parser tree)."""
