"""The posts' own numbers, checked by arithmetic: each sentence carries the numbers it was computed from."""

from __future__ import annotations

from helpers.course.seed_claims import augmentation_hours_text, card_memory_text, epoch_against_throughput_text
from helpers.spread import Spread


def test_post_000s_throughput_ratio_cannot_give_its_epoch_ratio():
    text = epoch_against_throughput_text()
    assert "18 -> 25 images/s is 1.39x the throughput" in text and "72% of the time" in text
    assert "from 372 s to 228 s, 1.63x shorter" in text


def test_the_8_gb_card_against_the_decoded_images():
    text = card_memory_text(200, 321, 481)  # BSDS300's training images, float32: about 353 MiB
    assert "200 decoded 481x321 images take 88 MiB as uint8 and 353 MiB as float32, 4% of 8 GiB" in text


def test_eight_hours_is_seventeen_images_a_second():
    text = augmentation_hours_text(Spread.of([100.0, 113.0, 120.0]), what="one busy worker")
    assert "is 17 images/s; one busy worker decoded and augmented 113 (100–120) images/s, 7x that" in text
