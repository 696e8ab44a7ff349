"""Ranges of numeric parameters, shared by the library, the recipe schema and the CLI: the
one table of what every numeric flag and recipe key accepts.

A :class:`Bound` checks a value and returns it, or raises ``ValueError`` that names the
parameter, the range and, where the range is not obvious, why it ends there (``why``).
Booleans are never numbers (``True`` is not 1), floats must be finite, and a whole-number
bound takes an integral float (``2.0``) but not ``2.5``. The same object is

- an argparse type (``tapt.cli.number_types.number_type``), so a flag refuses at parse time;
- a pydantic annotation (``Annotated[float, LOGIT_SCALE]``), so a recipe key is refused when
  the recipe is loaded, and ``tapt recipe schema`` shows the range;
- the library's own check (``BM25Retriever(k1=...)``).

Finite is not enough: a value must also make sense in the dtype it is used in. Scores,
logits and embeddings are float32 (largest value about 3.4e38); a BM25 ``k1`` of 1e100
scores every passage 0 in float32, a teacher score of 1e30 squared by ``margin_mse``
overflows. The upper ends below say where such a failure, or a memory size no machine has,
begins; the named bounds (``BM25_K1``, ``TOP_K``, ...) are the table.

Example::

    k1 = BM25_K1.check(k1, "k1")                   # nan, inf, -1, 1e100, True -> ValueError
    top_k = POSITIVE_INT.check(top_k, "top_k")      # 0, 1.5, True -> ValueError
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass

SEED_MAX = 2**32 - 1
"""The largest seed numpy's ``RandomState`` takes (seeds are in ``[0, 2**32 - 1]``)."""


@dataclass(frozen=True)
class Bound:
    """A range of whole (``integer=True``) or finite real numbers; ``None`` ends are open.

    ``low_open`` / ``high_open`` exclude that end."""

    description: str
    integer: bool = False
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    why: str = ""
    """Why the range ends where it does, added to every refusal (empty: obvious)."""

    def contains(self, value: float) -> bool:
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return self.high is None or not (value > self.high or
                                          (self.high_open and value == self.high))

    def check(self, value, name: str):
        """``value`` as an int (whole-number bounds) or a float, if it lies in the range;
        else ``ValueError`` naming ``name``."""
        real = isinstance(value, numbers.Real) and not isinstance(value, bool)
        whole = real and isinstance(value, numbers.Integral)
        number = whole or (real and math.isfinite(value))
        checked = None
        if self.integer and (whole or (number and float(value).is_integer())):
            checked = int(value)
        elif number and not self.integer:
            try:
                checked = float(value)
            except OverflowError:  # an int beyond float's range
                checked = None
        if checked is None or not self.contains(checked):
            raise ValueError(f"{name} must be {self.description}, got {_shown(value)}"
                             + (f" ({self.why})" if self.why else ""))
        return checked

    @property
    def documented(self) -> str:
        """The range and its reason, for help texts and ``tapt recipe schema``."""
        return self.description + (f" ({self.why})" if self.why else "")

    def __get_pydantic_core_schema__(self, source, handler):
        """As pydantic metadata (``Annotated[float, BOUND]``): checked after the type, on
        each item of a list and each value of a mapping; ``None`` (an optional key left
        unset) passes."""
        from pydantic_core import core_schema

        def one(value):
            try:
                return self.check(value, "value")
            except ValueError:
                raise ValueError(f"must be {self.documented}") from None

        def validate(value):  # a list: each item; a mapping: each value
            if isinstance(value, list):
                return [one(item) for item in value]
            if isinstance(value, dict):
                return {key: one(item) for key, item in value.items()}
            return value if value is None else one(value)

        return core_schema.no_info_after_validator_function(validate, handler(source))

    def parse(self, text: str, name: str):
        """``text`` (a command-line value) as a number in the range; whole-number bounds
        take only integer literals (``5``, not ``5.0`` or ``1e3``)."""
        try:
            value = int(text) if self.integer else float(text)
        except ValueError:
            raise ValueError(f"{name} must be {self.description}, got {_shown(text)}") \
                from None
        return self.check(value, name)


NUMBER_TEXT = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
"""A decimal number as YAML and JSON users write it: ``5``, ``-2.5``, ``2e-5``, ``1E3``."""
WHOLE_TEXT = re.compile(r"[+-]?[0-9]+")


def number_from_text(value):
    """``value``, with a text that is a decimal number (YAML 1.1 reads ``1e0`` and ``2e-5``
    as strings) turned into that number: an ``int`` for ``5``, else a ``float``. The one
    reading of numbers written as text, for every recipe key (``nan``, ``inf``, ``0x10``
    and ``1_000`` stay text, and are refused as not numbers)."""
    if not isinstance(value, str) or not NUMBER_TEXT.fullmatch(value.strip()):
        return value
    text = value.strip()
    try:
        return int(text) if WHOLE_TEXT.fullmatch(text) else float(text)
    except ValueError:  # more digits than int() reads: left to the type check
        return value


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# Descriptions read after "NAME must be".
POSITIVE_INT = Bound("at least 1 (a whole number)", integer=True, low=1)
NON_NEGATIVE_INT = Bound("at least 0 (a whole number)", integer=True, low=0)
SEED = Bound(f"a whole number in [0, {SEED_MAX}]", integer=True, low=0, high=SEED_MAX)
POSITIVE_FLOAT = Bound("> 0 (finite)", low=0, low_open=True)
NON_NEGATIVE_FLOAT = Bound(">= 0 (finite)", low=0)
FRACTION = Bound("in [0, 1]", low=0, high=1)
OPEN_FRACTION = Bound("in (0, 1)", low=0, high=1, low_open=True, high_open=True)
MARGIN = Bound("in [0, 1)", low=0, high=1, high_open=True)
FINITE_FLOAT = Bound("a finite number")


# --------------------------------------------------------------------------- the table
# Every numeric CLI flag and recipe key uses one of these (tests walk the parser and the
# schema). Upper ends: a dtype limit or a memory size no machine has, stated in ``why``.

DROPOUT = Bound("in [0, 1)", low=0, high=1, high_open=True)
WARMUP_RATIO = DROPOUT
HELD_OUT = Bound("in (0, 0.5)", low=0, high=0.5, low_open=True, high_open=True)
WIDTH = Bound("in [1, 65536] (a whole number)", integer=True, low=1, high=65536,
              why="embedding dimensions; the widest models have a few thousand")
SEQUENCE_LENGTH = Bound("in [1, 1048576] (a whole number)", integer=True, low=1,
                        high=2**20, why="tokens per text; no model reads a million")
CHUNK_LENGTH = Bound("in [9, 1048576] (a whole number)", integer=True, low=9, high=2**20,
                     why="tokens per sequence, special tokens included")
TOKENS_PER_BATCH = Bound("in [1, 2147483647] (a whole number)", integer=True, low=1,
                         high=2**31 - 1, why="padded tokens of one batch, an int32 count")
BATCH_SIZE = Bound("in [1, 65536] (a whole number)", integer=True, low=1, high=65536,
                   why="texts or rows in one batch")
TOP_K = Bound("in [1, 100000] (a whole number)", integer=True, low=1, high=100_000,
              why="ranks kept per query: every query's list is held in memory")
SKIP_TOP = Bound("in [0, 99999] (a whole number)", integer=True, low=0, high=99_999,
                 why="ranks skipped, below the depth")
COUNT = Bound("in [0, 9223372036854775807] (a whole number)", integer=True, low=0,
              high=2**63 - 1, why="numpy and torch count in int64")
POSITIVE_COUNT = Bound("in [1, 9223372036854775807] (a whole number)", integer=True, low=1,
                       high=2**63 - 1, why="numpy and torch count in int64")
STEP_COUNT = Bound("in [0, 1000000000] (a whole number)", integer=True, low=0, high=10**9,
                   why="optimizer steps")
KEPT = Bound("in [1, 1000000] (a whole number)", integer=True, low=1, high=10**6,
             why="checkpoints on disk")
OVERLAP = Bound("in [0, 1048576] (a whole number)", integer=True, low=0, high=2**20,
                why="tokens shared by consecutive windows")
STEPS = Bound("in [1, 1000000000] (a whole number)", integer=True, low=1, high=10**9,
              why="optimizer steps")
MAX_STEPS = Bound("-1 or in [1, 1000000000] (a whole number)", integer=True, low=-1,
                  high=10**9, why="-1 trains for training.epochs")
EPOCHS = Bound("in (0, 10000]", low=0, high=10_000, low_open=True,
               why="transformers turns epochs into a step count")
LEARNING_RATE = Bound("in (0, 1]", low=0, high=1, low_open=True,
                      why="AdamW moves each weight by about the learning rate per step; "
                          "above 1 every step overwrites the weights")
WEIGHT_DECAY = Bound("in [0, 1]", low=0, high=1,
                     why="AdamW shrinks weights by learning rate x decay per step")
ACCUMULATION = Bound("in [1, 65536] (a whole number)", integer=True, low=1, high=65536)
WORKERS = Bound("in [0, 1024] (a whole number)", integer=True, low=0, high=1024,
                why="processes")
THREADS = Bound("in [1, 1024] (a whole number)", integer=True, low=1, high=1024,
                why="intra-op threads of ONNX Runtime or OpenVINO")
AVERAGED = Bound("in [2, 1000] (a whole number)", integer=True, low=2, high=1000,
                 why="checkpoints kept on disk and averaged")
LORA_RANK = Bound("in [1, 65536] (a whole number)", integer=True, low=1, high=65536,
                  why="at most the model's width")
LORA_ALPHA = Bound("in [1, 1048576] (a whole number)", integer=True, low=1, high=2**20,
                   why="updates are scaled by alpha / r")
LOGIT_SCALE = Bound("in (0, 1000]", low=0, high=1000, low_open=True,
                    why="logits are scale x cosine: under a temperature of 0.001 the "
                        "softmax is a hard maximum whose gradients vanish, and from 3.4e38 "
                        "the float32 logits overflow")
LEXICAL_WEIGHT = Bound("in [0, 1000]", low=0, high=1000,
                       why="multiplies the lexical model's score in the combined vector")
HARDNESS = Bound("in [0, 1000]", low=0, high=1000,
                 why="added to the logits, which the scale bounds")
LOSS_WEIGHT = Bound("in (0, 1000]", low=0, high=1000, low_open=True,
                    why="multiplies a float32 loss")
GIST_MARGIN = Bound("in [-2, 2]", low=-2, high=2,
                    why="cosine similarities differ by at most 2")
TRAINING_TARGET = Bound("in [-1000000, 1000000]", low=-1e6, high=1e6,
                        why="float32 training targets: margin_mse squares their margins, "
                            "distill_kl's softmax multiplies them by the scale; cosines lie "
                            "in [-1, 1], BM25 scores in the tens")
NEGATIVES = Bound("in [0, 1000] (a whole number)", integer=True, low=0, high=1000,
                  why="columns of one training row")
BM25_K1 = Bound("in [0, 1000]", low=0, high=1000,
                why="bm25s scores in float32 shrink as 1/k1, to 0 for every passage from "
                    "about 1e45; past 1000 BM25 has stopped saturating term frequency")
RRF_K = Bound("in [0, 1000000]", low=0, high=1e6,
              why="1/(k + rank) gives every rank the same weight long before; from about "
                  "1e15 float64 cannot tell neighbouring ranks apart")
RESAMPLES = Bound("in [1, 100000] (a whole number)", integer=True, low=1, high=100_000,
                  why="scipy holds resamples x queries float64 values in memory")
CONCURRENCY = Bound("in [1, 256] (a whole number)", integer=True, low=1, high=256,
                    why="requests in flight, one thread each")
RATE = Bound("in [0, 1000000000]", low=0, high=1e9, why="per minute; 0: no limit")
CACHE_GB = Bound("in [0, 1000000]", low=0, high=1e6, why="gigabytes (10**9 bytes)")
DAYS = Bound("in [0, 36500]", low=0, high=36_500, why="a century")
SAMPLE = Bound("in [1, 10000000] (a whole number)", integer=True, low=1, high=10**7,
               why="pairs or passages sampled, each an embedding held in memory")
GRADE = Bound("in [1, 1000] (a whole number)", integer=True, low=1, high=1000,
              why="qrels grades lie in [-1000, 1000]")
SYNTH_QUERIES = Bound("in [1, 20000] (a whole number)", integer=True, low=1, high=20_000,
                      why="tapt data synth builds the dataset in memory, about 30 KB and "
                          "8 ms per query; larger sets are not synthetic benchmarks")
SYNTH_DISTRACTORS = Bound("in [0, 200000] (a whole number)", integer=True, low=0,
                          high=200_000,
                          why="tapt data synth builds the dataset in memory, about 4 KB and "
                              "2 ms per passage")


ONE_POINT_ZERO = ("1.0 is ambiguous: a fraction below 1 is a share of the train queries "
                  "and 1.0 would be all of them, a whole number counts queries; write 1 for "
                  "one query or a fraction such as 0.1")
"""Why a dev carve of 1.0 is refused (``data.dev_from_train``, ``--dev-from-train``)."""


def is_one_point_zero(value: object) -> bool:
    """One written as a fraction (``1.0``, ``1.``, ``1e0``; a float 1.0), not the whole
    number ``1``: a dev carve refuses it (:data:`ONE_POINT_ZERO`)."""
    if isinstance(value, float):
        return value == 1.0
    if not isinstance(value, str):
        return False
    text = value.strip()
    try:
        return float(text) == 1.0 and not text.lstrip("+").isdigit()
    except ValueError:
        return False

DEV_CARVE = Bound("a number of queries in [1, 10000000] or a fraction in (0, 1)", low=0,
                  high=10**7, low_open=True, why="a whole number counts queries, a number "
                  "below 1 is a share of them")
SOUP_SIZE = Bound("in [2, 1000] (a whole number)", integer=True, low=2, high=1000,
                  why="every ingredient is held in memory at once")
WEAK_PAIRS = Bound("in [1, 100000000] (a whole number)", integer=True, low=1, high=10**8,
                   why="one pair per passage at most; FormBench has about 1M")
RESCORE = Bound("in [1, 100] (a whole number)", integer=True, low=1, high=100,
                why="rescoring holds top_k x K x dim float32 values per query batch; "
                    "sentence-transformers' usual multiplier is 4")
CALIBRATION = Bound("in [1, 100000] (a whole number)", integer=True, low=1, high=100_000,
                    why="calibration passages, all held in memory and run through the model")
MAP_SAMPLE = Bound("in [3, 100000] (a whole number)", integer=True, low=3, high=100_000,
                   why="passages embedded and projected at once: t-SNE and UMAP build a "
                       "neighbour graph over all of them, of at least 3 points")
CASES_SHOWN = Bound("in [1, 100000] (a whole number)", integer=True, low=1, high=100_000,
                    why="queries, passages or characters shown in one Markdown report")


def check_optional(bound: Bound, value, name: str):
    """``None`` stays ``None`` (the parameter's default applies); anything else is checked."""
    return None if value is None else bound.check(value, name)
