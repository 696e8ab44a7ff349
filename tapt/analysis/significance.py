"""Is a gain real? Paired tests of systems against a baseline on the same queries.

With 25-200 test queries a difference of 0.01-0.03 nDCG@10 is often noise, so
``tapt compare --baseline NAME`` reports, per system, on the queries both systems share:

- the mean per-query difference ``system - baseline`` (``delta``);
- a 95 % **percentile** bootstrap interval of that mean (``scipy.stats.bootstrap`` on the
  per-query differences, one sample). Percentile, not scipy's default BCa: it is defined
  for every input (BCa gives NaN, with a warning, when the differences are all equal, e.g.
  two systems that tie on every query) and at 25+ queries the two agree closely;
- the two-sided p-value of a paired randomization test (``scipy.stats.permutation_test``
  with ``permutation_type="samples"``: each query's pair of values is swapped or not, i.e.
  the sign of its difference is flipped; exact when ``2**queries <= n_resamples``);
- that p-value Holm-corrected across the systems tested against the same baseline on the
  same corpus (:func:`holm`);
- the smallest difference these queries could detect (``detectable``, :func:`detectable_difference`):
  so a reader knows whether "not significant" means "no gain" or "too few queries".

Both resamplings use ``n_resamples`` (default 10,000) and a generator seeded with ``seed``
(default 0), so a comparison prints the same numbers every time.

Example::

    test = paired_test([0.8, 0.6, 0.9], [0.5, 0.6, 0.7])
    test.delta, (test.ci_low, test.ci_high), test.p_value
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# scipy is imported by the function that needs it (importing tapt.analysis stays light).

logger = logging.getLogger(__name__)

N_RESAMPLES = 10_000
SEED = 0
CONFIDENCE = 0.95
ALPHA = 0.05
POWER = 0.80
METHOD = {"test": "paired randomization test (sign flips), two-sided",
          "interval": "percentile bootstrap of the mean per-query difference",
          "correction": "holm"}


@dataclass(frozen=True)
class PairedTest:
    """``a - b`` on paired queries: mean, bootstrap interval, p-value and query count."""

    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    queries: int
    detectable: float = math.nan
    """The smallest true mean difference detected with 80 % power at alpha 0.05
    (:func:`detectable_difference` of the per-query differences)."""


@dataclass(frozen=True)
class Versus:
    """One system against the baseline on one corpus; ``p_holm`` is the corrected p."""

    test: PairedTest
    p_holm: float

    @property
    def significant(self) -> bool:
        return self.p_holm < ALPHA

    def to_dict(self) -> dict:
        t = self.test
        return {"delta": t.delta, "ci_low": t.ci_low, "ci_high": t.ci_high,
                "p_value": t.p_value, "p_holm": self.p_holm, "queries": t.queries,
                "detectable_difference": t.detectable, "power": POWER}


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x - y, axis=axis)


def paired_test(a: Sequence[float], b: Sequence[float], *, n_resamples: int = N_RESAMPLES,
                seed: int = SEED, confidence: float = CONFIDENCE) -> PairedTest:
    """Paired test of ``a`` against ``b`` (same queries, same order; at least 2).

    The interval is ``scipy.stats.bootstrap((a - b,), np.mean, method="percentile")`` and
    the p-value ``scipy.stats.permutation_test((a, b), mean(x - y),
    permutation_type="samples")``, each with ``rng=np.random.default_rng(seed)``.
    """
    from scipy import stats

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"paired values must be two equally long lists, got shapes "
                         f"{x.shape} and {y.shape}")
    if x.size < 2:
        raise ValueError(f"a paired test needs at least 2 queries, got {x.size}")
    diffs = x - y
    interval = stats.bootstrap((diffs,), np.mean, n_resamples=n_resamples,
                               confidence_level=confidence, method="percentile",
                               rng=np.random.default_rng(seed)).confidence_interval
    permuted = stats.permutation_test((x, y), _mean_difference, permutation_type="samples",
                                      vectorized=True, n_resamples=n_resamples,
                                      alternative="two-sided",
                                      rng=np.random.default_rng(seed))
    return PairedTest(delta=float(diffs.mean()), ci_low=float(interval.low),
                      ci_high=float(interval.high), p_value=float(permuted.pvalue),
                      queries=int(x.size), detectable=detectable_difference(diffs))


def detectable_difference(diffs: Sequence[float], *, alpha: float = ALPHA,
                          power: float = POWER) -> float:
    """The minimum detectable mean difference of a paired design: the smallest true mean
    per-query difference that a two-sided paired test at ``alpha`` finds with probability
    ``power``, given the spread of these per-query differences (at least 2):
    ``(t(1 - alpha/2, n-1) + t(power, n-1)) * sd(diffs, ddof=1) / sqrt(n)``.

    This is the standard closed form for the paired t-test (the noncentral t replaced by a
    shifted central t; within 1 % of the exact noncentral answer from n = 20 on). The
    randomization test that tapt reports has, at these sample sizes, the t-test's power.
    """
    from scipy import stats

    data = np.asarray(diffs, dtype=float)
    if data.ndim != 1 or data.size < 2:
        raise ValueError(f"a detectable difference needs at least 2 paired values, got "
                         f"{data.size}")
    df = data.size - 1
    quantiles = stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)
    return float(quantiles * data.std(ddof=1) / math.sqrt(data.size))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment (family-wise error rate), in the input order.

    The i-th smallest p is multiplied by ``m - i + 1`` (i from 1), capped at 1 and made
    monotone: ``[0.01, 0.04, 0.03] -> [0.03, 0.06, 0.06]``. Hand-written because scipy
    only has the false-discovery-rate procedures (``false_discovery_control``: BH, BY) and
    statsmodels' ``multipletests`` is not a dependency.
    """
    for p in p_values:
        if not 0 <= p <= 1:  # NaN fails too
            raise ValueError(f"p-values must lie in [0, 1], got {p!r}")
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof 1; NaN for a single value)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("mean_std needs at least one value")
    return float(data.mean()), float(data.std(ddof=1)) if data.size > 1 else math.nan


def against_baseline(values: Mapping[str, Mapping[str, float]], baseline: str, *,
                     sources: Mapping[str, str], corpus: str = "",
                     n_resamples: int = N_RESAMPLES, seed: int = SEED) -> dict[str, Versus]:
    """Test every system in ``values`` ({system: {query id: value}}) against ``baseline``.

    Each pair uses the query ids both hold, in sorted order (so the resamplings do not
    depend on the order of a file's keys): none shared is a ValueError naming both
    ``sources`` (the systems' files); differing sets are a warning with the counts. The
    p-values are Holm-corrected across the systems tested here.
    """
    base = values[baseline]
    where = f" on {corpus}" if corpus else ""
    tests: dict[str, PairedTest] = {}
    for name, own in values.items():
        if name == baseline:
            continue
        shared = sorted(own.keys() & base.keys())
        pair = f"{name} ({sources[name]}) and baseline {baseline} ({sources[baseline]})"
        if len(shared) < 2:
            raise ValueError(f"{pair} share {len(shared)} quer{'y' if len(shared) == 1 else 'ies'}"
                             f"{where}; a paired test needs results on the same queries (same "
                             "data and split)")
        if len(shared) != len(own) or len(shared) != len(base):
            logger.warning("%s%s: %d and %d queries, %d shared; the paired test uses the "
                           "shared ones", pair, where, len(own), len(base), len(shared))
        tests[name] = paired_test([own[q] for q in shared], [base[q] for q in shared],
                                  n_resamples=n_resamples, seed=seed)
    corrected = holm([t.p_value for t in tests.values()])
    return {name: Versus(test, p) for (name, test), p in zip(tests.items(), corrected,
                                                             strict=True)}


def per_query_values(block: object, source: str, metric: str) -> dict[str, float]:
    """``{query id: value}`` of ``metric`` from a result file's ``per_query`` block, checked.

    Queries without the metric are left out (trec_eval gives binary metrics only to
    queries with a relevant passage)."""
    if block is None:
        raise ValueError(f"{source}: no 'per_query' block; --baseline tests per-query values "
                         "(tapt eval/bm25 --output write them)")
    if not isinstance(block, dict):
        problem = f"{source}: field 'per_query': expected an object of query id -> metrics"
        raise ValueError(problem)  # noqa: TRY004 (a malformed file, not a wrong argument)
    values = {}
    for query_id, row in block.items():
        if not isinstance(row, dict):
            problem = f"{source}: field 'per_query.{query_id}': expected metric -> value"
            raise ValueError(problem)  # noqa: TRY004
        if metric not in row:
            continue
        value = row[metric]
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0 <= value <= 1:  # NaN fails too
            raise ValueError(f"{source}: field 'per_query.{query_id}.{metric}': expected a "
                             f"value in [0, 1], got {value!r}")
        values[query_id] = float(value)
    if not values:
        raise ValueError(f"{source}: no query has a per-query '{metric}' value")
    return values


def seed_average(cell, metric: str, name: str, corpus: str) -> dict[str, float]:
    """Per-query ``metric`` of a comparison cell (:class:`tapt.analysis.compare.Cell`),
    averaged over its seeds on the queries all hold (a warning with the counts when their
    query sets differ)."""
    runs = [per_query_values(block, source, metric)
            for block, source in zip(cell.per_query, cell.sources, strict=True)]
    if len(runs) == 1:
        return runs[0]
    shared = set(runs[0]).intersection(*runs[1:])
    if not shared:
        raise ValueError(f"the seeds of {name} on {corpus} share no query with a '{metric}' "
                         f"value: {', '.join(cell.sources)}")
    if any(len(run) != len(shared) for run in runs):
        logger.warning("%s on %s: its seeds hold %s queries, %d shared; the paired test "
                       "averages over the shared ones", name, corpus,
                       "/".join(str(len(run)) for run in runs), len(shared))
    return {q: sum(run[q] for run in runs) / len(runs) for q in sorted(shared)}
