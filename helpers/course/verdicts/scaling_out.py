"""08's verdicts: bytes read and pixels decoded per rank, and the GAN step with one loader or two."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...pipeline_result import PipelineResult
from .text import compare, result_load_text


def rank_reads_verdict(reads: Sequence[dict[str, Any]]) -> str:
    """08: per rank and epoch at the most ranks, bytes read (cache crops against JPEG files, like for like) and
    pixels decoded (whole images against none)."""
    most = reads[-1]
    ratio = most["cache_mib"] / most["jpeg_mib"]
    relation = "more" if ratio > 1 else "fewer" if ratio < 1 else "as many"
    return (
        f"At {most['ranks']} ranks each rank reads {most['cache_mib']:.1f} MiB of crops per epoch from the uint8 cache "
        f"against {most['jpeg_mib']:.1f} MiB of JPEG files with lazy crops, {ratio:.2f}x: {relation} bytes (raw "
        f"pixels against compressed files). What the cache saves is decoding: lazy crops decode "
        f"{most['lazy_mib']:.0f} MiB of pixels per rank per epoch, the cache none."
    )


def gan_verdict(rows: dict[str, PipelineResult], *, batch: int) -> str:
    """08: the GAN step's compute against the generator's alone, and GAN iterations/s with one shared loader against
    a second loader for D, each with its range over interleaved blocks (within the noise named as such)."""
    (g_name, g), (shared_name, shared), (second_name, second) = rows.items()
    compute = compare(shared.compute, g.compute)
    rate = compare(shared.fed.per(batch), second.fed.per(batch), pick=("one shared loader", "a second loader"))
    return (
        f"Compute per iteration, the shared-loader GAN against G alone: {compute}. GAN iterations/s, one shared "
        f"loader against a second one for D: {rate}. (The second loader's draws count as compute, not data-wait.)"
        + result_load_text([g, shared, second])
    )
