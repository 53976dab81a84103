"""What measuring one loader feeding one step gives: fed against pre-made throughput, data-wait against compute, each
with its range over blocks, peak memory and the load meter's reading (helpers.measure.PipelineProbe makes these).

Example:
    >>> result = PipelineResult(
    ...     fed_samples_per_s=800.0, premade_samples_per_s=1000.0, pipeline_efficiency=0.8, data_wait_ms=2.0,
    ...     compute_ms=8.0, steps=30, peak_rss_mib=512.0, peak_device_mib=None,
    ... )
    >>> result.data_wait_fraction  # measure.measure_pipeline makes these from timed blocks
    0.2

Copy with: loadmeter.py (the load meter's reading), spread.py (each number with its range).
Needs: psutil, torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from .loadmeter import LoadReading
from .spread import Spread


@dataclass
class PipelineResult:
    """A loader feeding a model, against the same model on pre-made device batches, measured interleaved."""

    fed_samples_per_s: float  # fed: the loader feeding the step, end to end
    premade_samples_per_s: float  # the same step on batches already on the device: what a perfect loader would give
    pipeline_efficiency: float  # median over block pairs of fed / pre-made throughput (1.0: the model never waits)
    data_wait_ms: float  # mean per fed step: getting the next batch onto the device
    compute_ms: float  # mean per fed step: the step itself (mean wait + mean compute: a fed step's time)
    steps: int
    peak_rss_mib: float
    peak_device_mib: float | None  # CUDA: the highest of the measured blocks' allocator peaks (None off CUDA)
    efficiency_range: tuple[float, float] | None = None  # lowest and highest block-pair ratio: the spread
    fed_samples_per_s_range: tuple[float, float] | None = None  # lowest and highest fed block's samples/s
    premade_step_ms: float | None = None  # median over pre-made blocks of their time per step: the step undisturbed
    premade_samples_per_s_range: tuple[float, float] | None = None  # lowest and highest pre-made block's samples/s
    data_wait_ms_range: tuple[float, float] | None = None  # lowest and highest fed block's mean data-wait
    compute_ms_range: tuple[float, float] | None = None  # lowest and highest fed block's mean compute
    load: LoadReading | None = None  # what the rest of the machine used during the measured blocks
    fed_blocks: tuple[float, ...] = ()  # each fed block's samples/s in block order (pipelines measured alike pair)
    compute_blocks: tuple[float, ...] = ()  # each fed block's mean compute ms, in block order (pairs the same way)

    @property
    def data_wait_fraction(self) -> float:
        """Share of a fed step spent waiting for data."""
        return self.data_wait_ms / max(self.data_wait_ms + self.compute_ms, 1e-12)

    @property
    def fed(self) -> Spread:
        """Fed samples/s with its range over blocks; block by block where recorded, so that a ratio to a pipeline
        measured in the same interleaved blocks (measure_pipelines) pairs them."""
        fed = _blocks(self.fed_samples_per_s, self.fed_blocks)
        return fed or Spread.around(self.fed_samples_per_s, self.fed_samples_per_s_range)

    @property
    def premade(self) -> Spread:
        """Pre-made samples/s with its range over blocks."""
        return Spread.around(self.premade_samples_per_s, self.premade_samples_per_s_range)

    @property
    def efficiency(self) -> Spread:
        """The pipeline efficiency with its range over block pairs."""
        return Spread.around(self.pipeline_efficiency, self.efficiency_range)

    @property
    def data_wait(self) -> Spread:
        """Data-wait ms per fed step with its range over blocks."""
        return Spread.around(self.data_wait_ms, self.data_wait_ms_range)

    @property
    def compute(self) -> Spread:
        """Compute ms per fed step with its range over blocks (block by block where recorded, so ratios pair)."""
        return _blocks(self.compute_ms, self.compute_blocks) or Spread.around(self.compute_ms, self.compute_ms_range)

    # the names these had before fed and pre-made were named alike (kept so existing code reads them)
    samples_per_s = property(lambda self: self.fed_samples_per_s)
    ideal_samples_per_s = property(lambda self: self.premade_samples_per_s)
    samples_per_s_range = property(lambda self: self.fed_samples_per_s_range)


def _blocks(value: float, blocks: tuple[float, ...]) -> Spread | None:
    """`value` (as printed) paired by `blocks`, one per block; None for fewer than two blocks."""
    return Spread.paired(blocks, median=value) if len(blocks) >= 2 else None
