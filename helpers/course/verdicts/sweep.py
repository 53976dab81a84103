"""02's sweep of workers x intra-op threads: the best setting against no workers, the settings within its noise, what
oversubscribing the cores did to the step, the post's '2-4x the cores', and the ladder against the sweep."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...spread import Spread, compare_text, ratio_text
from ..ladder_row import LadderRow
from .ladder import label


def _rate(row: dict[str, Any]) -> Spread:
    """A sweep row's samples/s over its repeats (`runs`, one per repeat: the settings take turns in each repeat, so
    two rows compare repeat by repeat)."""
    return Spread.paired(row["runs"])


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when two sweep rows' ranges over repeats overlap (their difference is within the noise seen)."""
    return _rate(a).ties(_rate(b))


def _setting(row: dict[str, Any]) -> str:
    """A sweep setting as a reader says it: workers, intra-op threads, prefetch."""
    count = row.get("intra_op_threads")
    threads = f"{count} intra-op thread{'s' * (count != 1)}" if count else "torch's threads"
    workers = f"{row['num_workers']} worker{'s' * (row['num_workers'] != 1)}"
    return f"{workers}, {threads}" + (f", prefetch {row['prefetch_factor']}" if row["num_workers"] else "")


def _sweep_rate(row: dict[str, Any]) -> str:
    return _rate(row).text(unit="samples/s")


def _ms_span(times: Spread) -> str:
    """'35.5 ms (35.0–36.0 over 4 runs)', or '52.0 ms (one run: no range)'."""
    if times.n == 1:
        return f"{times.text(1, unit='ms')} (one run: no range)"
    return f"{times.median:.1f} ms ({times.low:.1f}–{times.high:.1f} over {times.n} runs)"


def _oversubscription_text(rows: Sequence[dict[str, Any]], cores: int) -> str:
    """End to end: per intra-op thread count, the step's compute over every repeat of the settings whose workers
    overfill the cores, against those within them (the same thread count, so only the workers differ)."""
    parts = []
    for threads in sorted({r["intra_op_threads"] for r in rows if r.get("intra_op_threads")}):
        same = [r for r in rows if r.get("intra_op_threads") == threads and "compute_ms" in r]
        runs = [(r["num_workers"] + threads > cores, c) for r in same for c in r.get("compute_runs", [r["compute_ms"]])]
        if len({past for past, _ in runs}) < 2:
            continue
        over = Spread.of([c for past, c in runs if past])
        within = Spread.of([c for past, c in runs if not past])
        if over.n == 1 and within.n == 1:
            relation = "one run each, so no range to tell them apart by"
        elif over.ties(within):
            relation = "this run cannot tell them apart"
        else:
            relation = "slower" if over.low > within.high else "faster"
        parts.append(
            f"with {threads} thread{'s' * (threads != 1)}, {_ms_span(within)} per step within the cores against "
            f"{_ms_span(over)} past them: {relation}"
        )
    if not parts:
        return ""
    lead = f"\nThe step's compute with workers + intra-op threads within the {cores} cores or past them: "
    return lead + "; ".join(parts) + "."


def _claim_text(rows: Sequence[dict[str, Any]], cores: int) -> str:
    """The post's 'num_workers = 2-4x the cores', against the best setting with fewer workers."""
    claimed = [r for r in rows if 2 * cores <= r["num_workers"] <= 4 * cores]
    fewer = [r for r in rows if r["num_workers"] < 2 * cores]
    if not claimed or not fewer:
        return (
            f"\nThe post's 'num_workers = 2–4x the cores' is untested here: no setting had "
            f"{2 * cores}–{4 * cores} workers" + ("" if claimed else " (the profile's cap on workers)") + "."
        )
    c, f = max(claimed, key=lambda r: r["samples_per_s"]), max(fewer, key=lambda r: r["samples_per_s"])
    if _overlap(c, f):
        outcome = (
            f"within the noise here: its best, {_setting(c)}, {_sweep_rate(c)}, against {_setting(f)}, {_sweep_rate(f)}"
        )
    elif c["samples_per_s"] > f["samples_per_s"]:
        outcome = (
            f"supported here: {_setting(c)} gave {_sweep_rate(c)}, against the best with fewer workers "
            f"({_setting(f)}, {_sweep_rate(f)}) {compare_text(_rate(c), _rate(f))}"
        )
    else:
        outcome = (
            f"not supported here: {_setting(f)} gave {_sweep_rate(f)}, against the best of 2–4x the cores "
            f"({_setting(c)}, {_sweep_rate(c)}) {compare_text(_rate(f), _rate(c))}"
        )
    return f"\nThe post's 'num_workers = 2–4x the cores' is {outcome}."


def sweep_verdict(rows: Sequence[dict[str, Any]], *, cores: int) -> str:
    """02: the best setting of workers x intra-op threads against no workers, the settings within its noise, what
    oversubscribing the cores did to the step, and the post's '2-4x the cores' tested."""
    best = max(rows, key=lambda r: r["samples_per_s"])
    zero = max((r for r in rows if r["num_workers"] == 0), key=lambda r: r["samples_per_s"], default=None)
    zero = zero or min(rows, key=lambda r: r["num_workers"])
    what = (
        "End to end (the loader feeding the training step)"
        if best.get("mode") == "end to end"
        else "The loader alone (no training step)"
    )
    threads = best.get("intra_op_threads") or cores
    relation = (
        "more workers than cores"
        if best["num_workers"] > cores
        else "as many workers as cores"
        if best["num_workers"] == cores
        else "fewer workers than cores"
    )
    against = (  # never the best setting against itself
        "faster (by median) than every setting with workers"
        if best is zero
        else f"{ratio_text(best['samples_per_s'] / zero['samples_per_s'])} the {zero['samples_per_s']:.0f} of "
        f"{_setting(zero)}"
    )
    text = (
        f"{what}, the fastest setting here was {_setting(best)}: {_sweep_rate(best)}, {against}; that is "
        f"{relation}, and {best['num_workers']} worker(s) + {threads} intra-op thread(s) on {cores} cores."
    )
    close = [r for r in rows if r is not best and _overlap(r, best)]
    if len(best["runs"]) > 1 and close:
        fewest = min(close, key=lambda r: r["num_workers"])
        text += (
            f" {len(close)} other setting(s) are within its noise over {len(best['runs'])} repeats (compared repeat "
            f"by repeat), the fewest workers among them {fewest['num_workers']}."
        )
    return text + _oversubscription_text(rows, cores) + _claim_text(rows, cores)


def sweep_ladder_verdict(
    sweep: Sequence[dict[str, Any]],
    ladder: Sequence[LadderRow],
    *,
    pairs: Sequence[tuple[str, dict[str, Any]]],
    ladder_threads: int,
) -> str:
    """02: each ladder rung's end-to-end rate against the sweep's row with the same setting (`pairs`: rung name and
    the sweep keys it matches), agreeing when their ranges overlap; where they do not, what differs between the two
    (a rung's own `threads`, where its row has them, else `ladder_threads`)."""
    parts, differ = [], []
    for name, match in pairs:
        rung = next(r for r in ladder if r.name == name)
        row = next(r for r in sweep if all(r.get(k) == v for k, v in match.items()))
        # unpaired: ladder rounds and sweep repeats are not the same rounds
        repeats = Spread.around(row["samples_per_s"], (min(row["runs"]), max(row["runs"])), len(row["runs"]))
        agree = repeats.ties(rung.fed)
        ratio = repeats.ratio(rung.fed).median
        verdict = "within the noise" if agree else f"the sweep measured {ratio_text(ratio)} the ladder's rate"
        parts.append(f"'{label(rung)}' {rung.fed.text()} against {_sweep_rate(row)}: {verdict}")
        if not agree:
            differ.append((rung, row))
    text = "End to end, the ladder's rungs against the sweep's same settings: " + "; ".join(parts) + "."
    if differ:
        rung, row = differ[0]
        threads, rung_threads = row.get("intra_op_threads") or ladder_threads, rung.threads or ladder_threads
        text += (
            f"\nThe two measure differently: the ladder gives each rung {rung.rounds} turns of {rung.steps_per_turn} "
            f"steps with its workers kept alive, the sweep a fresh loader for each of its {len(row['runs'])} turns"
            + (
                f", with {threads} intra-op thread{'s' * (threads != 1)} against {rung_threads}"
                if threads != rung_threads
                else ""
            )
            + ", and they ran at different times."
        )
    return text
