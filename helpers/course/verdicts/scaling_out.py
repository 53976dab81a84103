"""08's verdicts: bytes read and pixels decoded per rank, and the GAN step with one loader or two."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .text import ratio_with_range, result_load_text, span_text


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


def gan_verdict(rows: dict[str, Any], *, batch: int) -> str:
    """08: the GAN step's compute against the generator's alone, and what a second loader cost, each with its range
    over interleaved blocks (overlapping ranges named as noise)."""
    (g_name, g), (shared_name, shared), (second_name, second) = rows.items()
    compute = ratio_with_range(shared.compute_ms, shared.compute_ms_range, g.compute_ms, g.compute_ms_range)
    waits = ratio_with_range(
        second.data_wait_ms,
        second.data_wait_ms_range,
        shared.data_wait_ms,
        shared.data_wait_ms_range,
        pick=(second_name, shared_name),
        lower_is_better=True,
    )
    rate = ratio_with_range(
        shared.fed_samples_per_s,
        shared.fed_samples_per_s_range,
        second.fed_samples_per_s,
        second.fed_samples_per_s_range,
        pick=(shared_name, second_name),
    )

    def per_batch(r: Any) -> str:
        return span_text(r.fed_samples_per_s / batch, tuple(v / batch for v in r.fed_samples_per_s_range), 2)

    return (
        f"Compute per iteration: '{shared_name}' {span_text(shared.compute_ms, shared.compute_ms_range, 1)} ms against "
        f"{span_text(g.compute_ms, g.compute_ms_range, 1)} ms for '{g_name}', {compute}. Data-wait: "
        f"{span_text(shared.data_wait_ms, shared.data_wait_ms_range, 2)} ms with one shared loader, "
        f"{span_text(second.data_wait_ms, second.data_wait_ms_range, 2)} ms when D draws from a second loader (whose draws "
        f"are timed as compute: {span_text(second.compute_ms, second.compute_ms_range, 1)} ms), {waits}; "
        f"{per_batch(shared)} against {per_batch(second)} GAN iterations/s, {rate}."
        + result_load_text([g, shared, second])
    )
