"""The two posts' own numbers checked against each other and against this run (lessons 01, 02 and 04): arithmetic
that needs no GPU, computed here so that every sentence about them comes from code.

Post 000 (BSD100 super-resolution) reports 18 -> 25 images/s and a first epoch of 6 min 12 s -> 3 min 48 s on an
RTX 3080, and an "8 GB card" that cannot finish an epoch holding the images; post 002 (CIFAR-10) reports 8 hours of
CPU augmentation for a loop of 10 epochs over CIFAR-10's 50,000 training images."""

from __future__ import annotations

from ..spread import Spread

POST_000_THROUGHPUT = (18.0, 25.0)  # images/s, before -> after
POST_000_FIRST_EPOCH_S = (6 * 60 + 12.0, 3 * 60 + 48.0)  # seconds, before -> after
POST_000_CARD_GB = 8.0
POST_002_HOURS, POST_002_EPOCHS, CIFAR10_TRAIN_IMAGES = 8.0, 10, 50_000


def epoch_against_throughput_text() -> str:
    """Post 000: the epoch time ratio its throughput ratio implies (the same epoch, so the same images) against the
    one it reports."""
    before, after = POST_000_THROUGHPUT
    slow, fast = POST_000_FIRST_EPOCH_S
    return (
        f"Post 000's own numbers disagree: {before:g} -> {after:g} images/s is {after / before:.2f}x the throughput, "
        f"so the same epoch should take {1 / (after / before):.0%} of the time, yet its first epoch went from "
        f"{slow:.0f} s to {fast:.0f} s, {slow / fast:.2f}x shorter. One of them was not measured on the same epoch."
    )


def card_memory_text(images: int, height: int, width: int) -> str:
    """Post 000's "8 GB card": what `images` decoded RGB images of height x width take as uint8 and as float32."""
    pixels = images * height * width * 3
    uint8_mib, float_mib = pixels / 2**20, 4 * pixels / 2**20
    share = float_mib / (POST_000_CARD_GB * 1024)
    return (
        f"Post 000's 8 GB card: {images} decoded {width}x{height} images take {uint8_mib:.0f} MiB as uint8 and "
        f"{float_mib:.0f} MiB as float32, {share:.0%} of 8 GiB; holding the images cannot be what filled it."
    )


def augmentation_hours_text(measured: Spread, *, what: str) -> str:
    """Post 002's "8 hours": the augmentation rate its own loop implies, against `measured` (images/s, `what` says
    which loader on which machine)."""
    implied = POST_002_EPOCHS * CIFAR10_TRAIN_IMAGES / (POST_002_HOURS * 3600)
    return (
        f"Post 002's 8 hours of augmentation for {POST_002_EPOCHS} epochs of {CIFAR10_TRAIN_IMAGES:,} images is "
        f"{implied:.0f} images/s; {what} decoded and augmented {measured.text()} images/s, "
        f"{measured.median / implied:.0f}x that."
    )
