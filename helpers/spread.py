"""A median with the lowest and highest of repeated measurements (rounds, blocks, repeats), and the words for it: a
value with its range, one value against another as a ratio with its range ("within the noise of this machine" when
their ranges overlap), and a pipeline efficiency that never reads above 1 (fed steps cannot beat pre-made ones).

    >>> fed, premade = Spread.of([380.0, 400.0, 420.0]), Spread.of([790.0, 800.0, 810.0])
    >>> fed.text(), fed.overlaps(premade), compare_text(premade, fed)
    ('400 (380–420)', False, '2.0x (range 1.88–2.13x)')
    >>> efficiency_text(Spread(0.97, 0.95, 1.04))
    '0.97 (0.95–1.0 within the noise; highest block measured 1.04)'

Copy alone.
Needs: the standard library only.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

WITHIN_NOISE = "within the noise of this machine"  # how compare_text begins when two ranges overlap


@dataclass(frozen=True)
class Spread:
    """A median (or a total's rate) with the lowest and highest of the `n` measurements behind it; `n` is None where
    only the range was kept, and 1 for a single measurement, which has no range to read."""

    median: float
    low: float
    high: float
    n: int | None = None

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """The median, lowest and highest of `values` (at least one)."""
        if not values:
            raise ValueError("a spread needs at least one measurement; got none")
        return cls(statistics.median(values), min(values), max(values), len(values))

    @classmethod
    def single(cls, value: float) -> Spread:
        """One measurement: its own low and high, no range to read."""
        return cls(value, value, value, 1)

    @classmethod
    def around(cls, value: float, bounds: tuple[float, float] | None, n: int | None = None) -> Spread:
        """A value with the (low, high) range recorded beside it; a single measurement where none was recorded."""
        return cls.single(value) if bounds is None else cls(value, bounds[0], bounds[1], n)

    @property
    def range(self) -> tuple[float, float]:
        """(low, high), as results store it."""
        return self.low, self.high

    def overlaps(self, other: Spread) -> bool:
        """True when the two ranges share a value: their difference is within the noise seen."""
        return self.low <= other.high and other.low <= self.high

    def ratio(self, other: Spread) -> Spread:
        """This over `other`: the ratio of the two values, from lowest over highest to highest over lowest."""
        return Spread(self.median / other.median, self.low / other.high, self.high / other.low)

    def per(self, count: float) -> Spread:
        """Every value divided by `count`: samples/s per batch of `count` samples, say."""
        return Spread(self.median / count, self.low / count, self.high / count, self.n)

    def text(self, digits: int = 0, unit: str = "") -> str:
        """'400 (380–420)', with `unit` after the value ('35.5 ms (35.0–36.0)'); the value alone for one measurement."""
        value = f"{self.median:.{digits}f}" + (f" {unit}" if unit else "")
        return value if self.n == 1 else f"{value} ({self.low:.{digits}f}–{self.high:.{digits}f})"


def ratio_text(ratio: float) -> str:
    """A ratio as a reader says it: '3.2x' or '0.60x (less)' (never '1.00x (less)')."""
    return f"{ratio:.1f}x" if round(ratio, 2) >= 1 else f"{ratio:.2f}x (less)"


def compare_text(a: Spread, b: Spread) -> str:
    """a against b: '2.0x (range 1.88–2.13x)', the range from a's lowest over b's highest to a's highest over b's
    lowest; 'within the noise of this machine: measured ...' when the two ranges overlap; '4.2x (one measurement
    each: no range)' when neither has a range."""
    ratio = a.ratio(b)
    if a.low == a.high and b.low == b.high:
        return f"{ratio_text(ratio.median)} (one measurement each: no range)"
    shown = ratio_text(ratio.median)
    if ratio.median >= 1 and not ratio.low <= round(ratio.median, 1) <= ratio.high:  # one place would leave the range
        shown = f"{ratio.median:.2f}x"
    text = f"{shown} (range {ratio.low:.2f}–{ratio.high:.2f}x)"
    return f"{WITHIN_NOISE}: measured {text}" if a.overlaps(b) else text


def efficiency_text(efficiency: Spread, *, short: bool = False) -> str:
    """A pipeline efficiency (fed over pre-made throughput) with its range, never above 1 as a number: fed steps
    cannot beat pre-made ones, so a block above 1 is noise, and every block above 1 a pre-made baseline that ran slow
    (biased, not noise). `short` words it for a table cell."""
    median, low, high = efficiency.median, efficiency.low, efficiency.high
    if low > 1.0:
        if short:
            return f"1.0 at most (measured {median:.2f}; {low:.2f}–{high:.2f}, all >1: a biased baseline)"
        return (
            f"1.0 at most (measured {median:.2f}, {low:.2f}–{high:.2f}: every block above 1, so the pre-made steps "
            "ran slower than the fed ones, a biased baseline rather than noise)"
        )
    if median > 1.0:
        if short:
            return f"1.0 within noise (measured {median:.2f}; {low:.2f}–{high:.2f})"
        return f"1.0 within the noise (measured {median:.2f}, {low:.2f}–{high:.2f})"
    if high > 1.0:
        if short:
            return f"{median:.2f} ({low:.2f}–{high:.2f}, >1 is noise)"
        return f"{median:.2f} ({low:.2f}–1.0 within the noise; highest block measured {high:.2f})"
    return f"{median:.2f} ({low:.2f}–{high:.2f})"
