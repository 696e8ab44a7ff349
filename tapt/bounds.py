"""Ranges of numeric parameters, shared by the library, the recipe schema and the CLI.

A :class:`Bound` checks a value and returns it, or raises ``ValueError`` that names the
parameter and the range. Booleans are never numbers (``True`` is not 1), floats must be
finite, and a whole-number bound takes an integral float (``2.0``) but not ``2.5``.
``tapt.cli_options`` turns the same bounds into argparse types, so a flag and the library
parameter behind it refuse the same values.

Example::

    k1 = NON_NEGATIVE_FLOAT.check(k1, "k1")        # nan, inf, -1, True -> ValueError
    top_k = POSITIVE_INT.check(top_k, "top_k")      # 0, 1.5, True -> ValueError
"""

from __future__ import annotations

import math
import numbers
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
            raise ValueError(f"{name} must be {self.description}, got {_shown(value)}")
        return checked

    def parse(self, text: str, name: str):
        """``text`` (a command-line value) as a number in the range; whole-number bounds
        take only integer literals (``5``, not ``5.0`` or ``1e3``)."""
        try:
            value = int(text) if self.integer else float(text)
        except ValueError:
            raise ValueError(f"{name} must be {self.description}, got {_shown(text)}") \
                from None
        return self.check(value, name)


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


def check_optional(bound: Bound, value, name: str):
    """``None`` stays ``None`` (the parameter's default applies); anything else is checked."""
    return None if value is None else bound.check(value, name)
