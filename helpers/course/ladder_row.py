"""One rung of a loader ladder as measured: what the engine (ladder.py) returns, the verdicts read and
`python -m helpers.bench` writes as JSON (`dataclasses.asdict`, its fields in this order), each rate a median over
the ladder's rounds with its range."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..spread import Spread


def _rounds(values: list[float]) -> Spread | None:
    return Spread.paired(values) if values else None


@dataclass(kw_only=True)
class LadderRow:
    """A rung's numbers: the loader alone, fed end to end and on pre-made batches (samples/s, medians over rounds with
    their ranges), the efficiency the table prints, the step's wait and compute, and what the doctor read."""

    name: str
    role: str = ""  # what verdicts find the rung by ("seed post", "device", ...)
    bounds: str = ""  # a ceiling's: the role of the rung it bounds
    model_note: str = ""  # set when this rung's model differs from the others' (its fed rate is not like for like)
    workers: int = 0
    threads: int  # the timed process's intra-op threads
    loader_samples_per_s: float
    loader_samples_per_s_range: tuple[float, float]
    fed_samples_per_s: float
    fed_samples_per_s_range: tuple[float, float]
    premade_samples_per_s: float
    premade_samples_per_s_range: tuple[float, float]
    pipeline_efficiency: float  # the fed median over the pre-made median
    efficiency_range: tuple[float, float]  # the lowest and highest ratio of one round's blocks
    data_wait_ms: float
    compute_ms: float
    premade_step_ms: float | None
    rounds: int
    steps_per_turn: int
    peak_device_mib: float | None = None  # CUDA: what the rung holds plus the most its blocks allocated
    load: dict[str, Any] | None = None  # the load meter's reading over its blocks (LoadReading.as_dict())
    load_note: str = ""  # the load meter's sentence when the machine was busy
    doctor: str = ""  # the doctor's first line on this rung's numbers
    loader_vs_first: float = 1.0  # its loader-alone rate over the first rung's
    loader_rounds: list[float] = field(default_factory=list)  # loader-alone samples/s, round by round
    fed_rounds: list[float] = field(default_factory=list)  # fed samples/s, round by round (pairs with other rungs')

    @property
    def loader(self) -> Spread:
        """Loader-alone samples/s over the rounds (round by round where recorded, so ratios to other rungs pair)."""
        return _rounds(self.loader_rounds) or Spread.around(
            self.loader_samples_per_s, self.loader_samples_per_s_range, self.rounds
        )

    @property
    def fed(self) -> Spread:
        """Fed end-to-end samples/s over the rounds (round by round where recorded, so ratios to other rungs pair)."""
        return _rounds(self.fed_rounds) or Spread.around(
            self.fed_samples_per_s, self.fed_samples_per_s_range, self.rounds
        )

    @property
    def premade(self) -> Spread:
        """Samples/s of the same step on pre-made batches over the rounds."""
        return Spread.around(self.premade_samples_per_s, self.premade_samples_per_s_range, self.rounds)

    @property
    def efficiency(self) -> Spread:
        """The pipeline efficiency with its range over the rounds."""
        return Spread.around(self.pipeline_efficiency, self.efficiency_range, self.rounds)
