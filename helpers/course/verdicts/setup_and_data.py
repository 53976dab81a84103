"""00's verdict: the seed's image-size claim against the data set's census."""

from __future__ import annotations

from typing import Any


def census_verdict(
    census: Any, *, claimed: tuple[int, int], standard: set[tuple[int, int]], standin: bool = False
) -> str:
    """00: whether any image has the claimed size, and how many have the dataset's standard sizes (on a stand-in cut
    to those sizes, the census says only that it cannot test the claim)."""
    total = sum(census.values())
    at_claim = sum(n for (w, h, _, _), n in census.items() if (w, h) == claimed)
    standard_count = sum(n for (w, h, _, _), n in census.items() if (w, h) in standard)
    sizes = ", ".join(f"{w}x{h}" for w, h in sorted(standard))
    return (
        f"{at_claim} of {total} images are {claimed[0]}x{claimed[1]}; {standard_count} have the standard BSDS300 "
        f"sizes ({sizes}); {len({(w, h) for (w, h, _, _) in census})} different sizes in all."
    ) + (
        " The stand-in was cut to BSDS300's sizes wherever its photographs are large enough, so on it this census "
        "cannot test the claim: the real BSDS300 can."
        if standin
        else ""
    )
