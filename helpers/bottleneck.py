"""What bounds a training loop, from numbers measured on it: the step waits for data (input-bound), runs slower
beside its loader than on pre-made batches (the loader competes with it for the cores), spends its time copying
batches from pageable memory to a GPU (transfer-bound), or keeps up (compute-bound); with how sure that is and why.

A label is decided on the numbers as they are printed beside it (rounded the same way, by `Shares`), so it can never
contradict them: a wait printed as 10% is a wait of 10%, whatever the digits after it were.

    >>> shares = Shares.of(wait_ms=0.2, compute_ms=119.0, premade_ms=100.0)
    >>> shares.wait_pct, shares.slower_pct, shares.efficiency, classify(shares)
    (0, 16, 0.84, 'LOADER COMPETES WITH THE STEP')

Copy alone.
Needs: the standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

INPUT_BOUND = "INPUT-BOUND"
COMPETES = "LOADER COMPETES WITH THE STEP"
TRANSFER_BOUND = "TRANSFER-BOUND"
COMPUTE_BOUND = "COMPUTE-BOUND"
INCONCLUSIVE = "INCONCLUSIVE"  # nothing was measured to decide on
LABELS = (INPUT_BOUND, COMPETES, TRANSFER_BOUND, COMPUTE_BOUND, INCONCLUSIVE)

SIGNIFICANT_PCT = 10  # a wait, a slowdown or a copy of at least this percentage of a step is a cost, not noise
KEEPS_UP = 0.90  # an efficiency (pre-made over fed step time) at or above this: the loader costs at most a tenth
AGREEING = 2 / 3  # below this share of blocks reading the verdict, the verdict is "not sure" whatever else holds
MS_AGREE = 0.03  # an efficiency and the one its printed ms give agree within this; past it, both are named
NEAR = 1.5  # a deciding number under NEAR x its threshold is close to the line: one reason to be less sure


@dataclass(frozen=True)
class Shares:
    """One measurement as it is printed: each part of a fed step as a whole percentage, the efficiency to two places.

    Every share is a percentage of the same thing, a fed step (wait + compute), so the costs compare as printed.
    `wait_pct`: the data-wait. `slower_pct`: the fed step's compute beyond a pre-made step's (None without a pre-made
    step; negative when the fed compute was the shorter). `copy_pct`: the host-to-device copy of one batch (None when
    not measured: a CPU step copies nothing). The milliseconds keep the size of each cost, so the largest one names
    the bottleneck."""

    wait_pct: int
    slower_pct: int | None
    copy_pct: int | None
    efficiency: float
    wait_ms: float = 0.0  # the wait that is not the copy (the copy's share is copy_ms)
    slower_ms: float = 0.0
    copy_ms: float = 0.0

    @classmethod
    def of(
        cls,
        wait_ms: float,
        compute_ms: float,
        premade_ms: float | None = None,
        *,
        efficiency: float | None = None,
        copy_ms: float | None = None,
        copy_in_wait: bool = False,
    ) -> Shares:
        """The shares of one fed step; `efficiency` defaults to premade / (wait + compute); `copy_in_wait` when the
        wait includes the copy (the controlled comparison moves each batch itself), not the step (your own loop)."""
        fed = max(wait_ms + compute_ms, 1e-12)
        if efficiency is None:
            efficiency = premade_ms / fed if premade_ms else 1.0
        slower = compute_ms - premade_ms if premade_ms else 0.0
        fetch = max(0.0, wait_ms - (copy_ms or 0.0)) if copy_in_wait else wait_ms
        return cls(
            wait_pct=round(100 * wait_ms / fed),
            slower_pct=round(100 * slower / fed) if premade_ms else None,
            copy_pct=round(100 * copy_ms / fed) if copy_ms is not None else None,
            efficiency=round(efficiency, 2),
            wait_ms=fetch,
            slower_ms=slower,
            copy_ms=copy_ms or 0.0,
        )

    def costs(self) -> dict[str, float]:
        """Each cost the loader puts on the step, in ms, where it reaches SIGNIFICANT_PCT of a fed step."""
        found = {}
        if self.wait_pct >= SIGNIFICANT_PCT and self.wait_ms > 0:
            found[INPUT_BOUND] = self.wait_ms
        if self.slower_pct is not None and self.slower_pct >= SIGNIFICANT_PCT:
            found[COMPETES] = self.slower_ms
        if self.copy_pct is not None and self.copy_pct >= SIGNIFICANT_PCT:
            found[TRANSFER_BOUND] = self.copy_ms
        return found


def classify(shares: Shares) -> str:
    """The bottleneck one measurement reads as: the largest cost that reaches SIGNIFICANT_PCT of a step; none and an
    efficiency of at least KEEPS_UP is compute-bound; none with a lower efficiency, the largest cost anyway."""
    costs = shares.costs()
    if costs:
        return max(costs, key=lambda label: costs[label])
    if shares.efficiency >= KEEPS_UP:
        return COMPUTE_BOUND
    printed = {INPUT_BOUND: shares.wait_pct, COMPETES: shares.slower_pct, TRANSFER_BOUND: shares.copy_pct}
    sizes = {INPUT_BOUND: shares.wait_ms, COMPETES: shares.slower_ms, TRANSFER_BOUND: shares.copy_ms}
    small = {label: sizes[label] for label, pct in printed.items() if pct is not None and pct > 0 and sizes[label] > 0}
    return max(small, key=lambda name: small[name]) if small else COMPUTE_BOUND


@dataclass
class Finding:
    """The most likely bottleneck, how sure that is ("sure", "fairly sure" or "not sure"), and the reasons for doubt."""

    label: str
    confidence: str
    doubts: list[str] = field(default_factory=list)
    readings: list[str] = field(default_factory=list)  # what each block (or end of a range) read on its own

    def how_sure(self) -> str:
        """'sure: all 3 block pairs read so' or 'fairly sure: <the doubt>' / 'not sure: <the doubts>'."""
        if not self.doubts:
            return f"{self.confidence}: every one of the {len(self.readings)} readings agrees, on a quiet machine"
        return f"{self.confidence}: " + "; ".join(self.doubts)


def _near_the_line(label: str, shares: Shares) -> str:
    """Why the deciding number is close to its threshold, or '' when it is clear of it."""
    if label == COMPUTE_BOUND and shares.efficiency < KEEPS_UP:
        return f"the efficiency {shares.efficiency:.2f} is below {KEEPS_UP:.2f}, yet no part of the step shows the loss"
    if label == COMPUTE_BOUND and shares.efficiency < round(KEEPS_UP + 0.05, 2):
        return f"the efficiency {shares.efficiency:.2f} is within 0.05 of the {KEEPS_UP:.2f} line"
    if label != COMPUTE_BOUND and shares.efficiency >= KEEPS_UP:
        lag = round(100 * (1 - shares.efficiency))
        pace = f"kept within {lag}% of the pre-made pace" if lag > 0 else "kept pace with pre-made ones"
        return f"the fed steps {pace} all the same (efficiency {shares.efficiency:.2f}), so this cost costs the loop little"
    deciding = {INPUT_BOUND: shares.wait_pct, COMPETES: shares.slower_pct, TRANSFER_BOUND: shares.copy_pct}.get(label)
    if deciding is None:
        return ""
    if deciding < SIGNIFICANT_PCT:
        return (
            f"no single cost reaches {SIGNIFICANT_PCT}% of a step (this one is {deciding}%), though together they "
            f"bring the efficiency to {shares.efficiency:.2f}"
        )
    if deciding < NEAR * SIGNIFICANT_PCT:
        return f"{deciding}% is close to the {SIGNIFICANT_PCT}% line"
    return ""


def most_likely(shares: Shares, readings: Sequence[str], *, what: str = "block pairs", busy_note: str = "") -> Finding:
    """The verdict of the printed medians (`shares`), with how sure it is from how many `readings` (one per block
    pair, or per end of a range) agree, whether the machine was busy (`busy_note`, empty when quiet) and how close
    the deciding number is to its threshold: no doubt is "sure", one "fairly sure", more (or fewer than AGREEING of
    the readings agreeing) "not sure"."""
    label = classify(shares)
    doubts = []
    agree = sum(r == label for r in readings)
    if readings and agree < len(readings):
        others = ", ".join(f"{readings.count(r)} {r.lower()}" for r in dict.fromkeys(readings) if r != label)
        doubts.append(f"{agree} of {len(readings)} {what} read {label.lower()} ({others})")
    if busy_note:
        doubts.append(busy_note)
    near = _near_the_line(label, shares)
    if near:
        doubts.append(near)
    if not readings or agree / len(readings) < AGREEING or len(doubts) > 1:
        confidence = "not sure"
    else:
        confidence = "fairly sure" if doubts else "sure"
    return Finding(label, confidence, doubts, list(readings))


def shares_text(shares: Shares, *, copy_in_wait: bool = False) -> str:
    """The shares as the headline prints them, beside the label they decided."""
    parts = [f"{shares.wait_pct}% of each fed step waits for data"]
    if shares.slower_pct is not None:
        parts.append(_slowdown_text(shares.slower_pct))
    if shares.copy_pct is not None:
        where = "inside that wait" if copy_in_wait else "inside the step"
        parts.append(f"copying one batch to the device takes {shares.copy_pct}% of a fed step ({where})")
    return "; ".join(parts)


def reason_text(label: str, shares: Shares) -> str:
    """The number a label rests on, in a few words: '12% of each fed step waits for data', 'the step runs 19% slower
    beside the loader', 'the copy takes 15% of a fed step', or for compute-bound that no cost reaches the line."""
    if label == INPUT_BOUND:
        return f"{shares.wait_pct}% of each fed step waits for data"
    if label == COMPETES and shares.slower_pct is not None:
        return _slowdown_text(shares.slower_pct)
    if label == TRANSFER_BOUND and shares.copy_pct is not None:
        return f"the copy takes {shares.copy_pct}% of a fed step"
    if label == COMPUTE_BOUND:
        return f"no cost of the loader reaches {SIGNIFICANT_PCT}% of a step, at efficiency {shares.efficiency:.2f}"
    return "nothing was measured to decide on"


def _slowdown_text(pct: int) -> str:
    """The step's slowdown beside the loader, as a share of a fed step like the wait and the copy."""
    if pct > 0:
        return f"the step's slowdown beside the loader is {pct}% of each fed step"
    if pct < 0:
        return f"the step ran faster beside the loader than on pre-made batches (by {-pct}% of a fed step)"
    return "the step ran as fast beside the loader as on pre-made batches"


def ms_efficiency_note(efficiency: Any, shares: Shares, *, off: float = MS_AGREE) -> str:
    """Beside an efficiency measured as the median of block pairs' ratios (`efficiency.median`), the one the printed ms
    give (`shares`, which decided the label) where the two differ by more than `off`; '' where they agree."""
    if abs(efficiency.median - shares.efficiency) <= off:
        return ""
    return f" (the block pairs' median; the ms below give {shares.efficiency:.2f}, which the label reads)"
