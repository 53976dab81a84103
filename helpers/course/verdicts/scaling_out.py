"""08's verdicts: bytes read and pixels decoded per rank, and the GAN step with one loader or two."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...pipeline_result import PipelineResult
from .text import compare, result_load_text


def rank_reads_verdict(reads: Sequence[dict[str, Any]]) -> str:
    """08: per rank and epoch, bytes read (JPEG files against cache crops) and pixels decoded (whole images against
    none), at one rank and at the most ranks; like for like: bytes read against bytes read."""
    one, most = reads[0], reads[-1]
    ratio = most["cache_mib"] / most["jpeg_mib"]
    relation = "more" if ratio > 1 else "fewer" if ratio < 1 else "as many"
    return (
        f"Bytes read per rank per epoch at {most['ranks']} ranks: {most['cache_mib']:.1f} MiB of crops from the uint8 "
        f"cache against {most['jpeg_mib']:.1f} MiB of JPEG files with lazy crops, {ratio:.2f}x: the cache reads "
        f"{relation} bytes (JPEG files are compressed whole images; the cache holds raw pixels and reads only the "
        "crops). What the cache saves is decoding: lazy crops decode "
        f"{most['lazy_mib']:.0f} MiB of pixels per rank per epoch ({one['lazy_mib']:.0f} MiB at 1 rank; "
        f"{most['ranks'] * most['lazy_mib']:.0f} MiB for the node either way), the cache decodes none during training."
    )


def gan_verdict(rows: dict[str, PipelineResult], *, batch: int) -> str:
    """08: the GAN step's compute against the generator's alone, and what a second loader cost, each with its range
    over interleaved blocks (overlapping ranges named as noise)."""
    (g_name, g), (shared_name, shared), (second_name, second) = rows.items()
    compute = compare(shared.compute, g.compute)
    waits = compare(second.data_wait, shared.data_wait, pick=(second_name, shared_name))
    rate = compare(shared.fed, second.fed, pick=(shared_name, second_name))
    return (
        f"Compute per iteration: '{shared_name}' {shared.compute.text(1)} ms against "
        f"{g.compute.text(1)} ms for '{g_name}', {compute}. Data-wait: "
        f"{shared.data_wait.text(2)} ms with one shared loader, "
        f"{second.data_wait.text(2)} ms when D draws from a second loader (whose draws "
        f"are timed as compute: {second.compute.text(1)} ms), {waits}; "
        f"{shared.fed.per(batch).text(2)} against {second.fed.per(batch).text(2)} GAN iterations/s, {rate}."
        + result_load_text([g, shared, second])
    )
