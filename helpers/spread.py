"""A median with the lowest and highest of repeated measurements (rounds, blocks, repeats), and the words for it: a
value with its range, one value against another as a ratio with its range ("within the noise of this machine" when
that range reaches 1; round by round for measurements taken in interleaved rounds), and a pipeline efficiency that
never reads above 1 (fed steps cannot beat pre-made ones).

    >>> fed, premade = Spread.of([380.0, 400.0, 420.0]), Spread.of([790.0, 800.0, 810.0])
    >>> fed.text(), fed.ties(premade), compare_text(premade, fed)
    ('400 (380–420)', False, '2.0x (range 1.88–2.13x)')
    >>> compare_text(Spread.paired([500.0, 310.0, 530.0]), Spread.paired([300.0, 190.0, 320.0]))
    '1.67x (range 1.63–1.67x over 3 paired rounds)'
    >>> efficiency_text(Spread(0.97, 0.95, 1.04))
    '0.97 (0.95–1.0 within the noise; highest block measured 1.04)'

Copy alone.
Needs: the standard library only.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

WITHIN_NOISE = "within the noise of this machine"  # how compare_text begins when two ranges overlap


@dataclass(frozen=True)
class Spread:
    """A median (or a total's rate) with the lowest and highest of the `n` measurements behind it; `n` is None where
    only the range was kept, and 1 for a single measurement, which has no range to read."""

    median: float
    low: float
    high: float
    n: int | None = None
    # one value per round, in round order, for measurements taken in interleaved rounds (`paired`); empty otherwise
    rounds: tuple[float, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """The median, lowest and highest of `values` (at least one)."""
        if not values:
            raise ValueError("a spread needs at least one measurement; got none")
        return cls(statistics.median(values), min(values), max(values), len(values))

    @classmethod
    def paired(cls, values: Sequence[float], *, median: float | None = None) -> Spread:
        """`of`, for values measured one per round of an interleaved measurement (a, b, a, b...): kept in round order,
        so that `ratio` against another such spread divides round by round. `median` replaces the rounds' median where
        the value printed is another (a rate pooled over every block)."""
        spread = replace(cls.of(values), rounds=tuple(values))
        return spread if median is None else replace(spread, median=median)

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
        """True when the two ranges share a value."""
        return self.low <= other.high and other.low <= self.high

    def pairs_with(self, other: Spread) -> bool:
        """True when both were measured in the same interleaved rounds (as many rounds each, at least two)."""
        return len(self.rounds) >= 2 and len(self.rounds) == len(other.rounds)

    def ratio(self, other: Spread) -> Spread:
        """This over `other`: the ratio of the two medians, with the range of the round-by-round ratios when the two
        pair (a burst of load hits both sides of a round alike), else from lowest over highest to highest over
        lowest; the range always holds the ratio of the medians."""
        value = self.median / other.median
        if not self.pairs_with(other):
            return Spread(value, self.low / other.high, self.high / other.low)
        each = [a / b for a, b in zip(self.rounds, other.rounds)]
        return Spread(value, min(*each, value), max(*each, value), len(each), tuple(each))

    def ties(self, other: Spread) -> bool:
        """True when the difference is within the noise seen: the range of the ratio (`ratio`) reaches 1. The one
        rule for "within the noise" wherever two measurements are compared."""
        ratio = self.ratio(other)
        return ratio.low <= 1.0 <= ratio.high

    def per(self, count: float) -> Spread:
        """Every value divided by `count`: samples/s per batch of `count` samples, say (its rounds too, so it pairs)."""
        rounds = tuple(value / count for value in self.rounds)
        return Spread(self.median / count, self.low / count, self.high / count, self.n, rounds)

    def text(self, digits: int = 0, unit: str = "") -> str:
        """'400 (380–420)', with `unit` after the value ('35.5 ms (35.0–36.0)'); the value alone for one measurement."""
        value = f"{self.median:.{digits}f}" + (f" {unit}" if unit else "")
        return value if self.n == 1 else f"{value} ({self.low:.{digits}f}–{self.high:.{digits}f})"


def _bound(value: float) -> str:
    """A range's end to two places, or three where two would print 1.00 for a value that is not 1: the side of 1 it
    lies on decides "within the noise", so the printed digits must show it."""
    return f"{value:.3f}" if f"{value:.2f}" == "1.00" and value != 1.0 else f"{value:.2f}"


def ratio_text(ratio: float) -> str:
    """A ratio as a reader says it: '3.2x' or '0.60x (less)' (never '1.00x (less)')."""
    return f"{ratio:.1f}x" if round(ratio, 2) >= 1 else f"{ratio:.2f}x (less)"


def compare_text(a: Spread, b: Spread) -> str:
    """a against b: '2.0x (range 1.88–2.13x)', the range of the ratio (`Spread.ratio`: round by round where the two
    pair); 'within the noise of this machine: measured ...' when that range reaches 1; '4.2x (one measurement each:
    no range)' when neither has a range."""
    ratio = a.ratio(b)
    if a.low == a.high and b.low == b.high:
        return f"{ratio_text(ratio.median)} (one measurement each: no range)"
    return ratio_spread_text(ratio, paired=a.pairs_with(b))


def ratio_spread_text(ratio: Spread, *, paired: bool = False) -> str:
    """A ratio with its range: '1.7x (range 1.42–1.80x)'; 'within the noise of this machine: measured ...' when the
    range reaches 1 (the one rule for noise, whether the range comes from two ranges or from pairs). `paired` says
    that the range is of per-round ratios."""
    shown = ratio_text(ratio.median)
    if ratio.median >= 1 and not ratio.low <= round(ratio.median, 1) <= ratio.high:  # one place would leave the range
        shown = f"{ratio.median:.2f}x"
    over = f" over {ratio.n} paired rounds" if paired and ratio.n else ""
    text = f"{shown} (range {_bound(ratio.low)}–{_bound(ratio.high)}x{over})"
    return f"{WITHIN_NOISE}: measured {text}" if ratio.low <= 1.0 <= ratio.high else text


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
            return f"{median:.2f} ({low:.2f}–1.0 within noise; max {high:.2f})"
        return f"{median:.2f} ({low:.2f}–1.0 within the noise; highest block measured {high:.2f})"
    return f"{median:.2f} ({_bound(low)}–{_bound(high)})"
