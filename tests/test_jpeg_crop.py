"""Reduced-size JPEG decoding: the box is torchvision's, drawn from the header; the reduction never leaves fewer
pixels than the output needs; the box lands on the same place of the reduced image; the result equals the
full-decode path within a stated tolerance; draws differ per sample and per worker; a bad file is named."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image
from skimage import data
from torchvision.transforms import RandomResizedCrop

from helpers.images import BadImageError
from helpers.jpeg_crop import ReducedCropDataset, decode_crop, jpeg_reduction, map_box, random_resized_crop_box

# Mean absolute difference, in 0..255 levels, allowed between a crop decoded at reduced size and the same crop
# decoded in full: DCT scaling averages blocks where PIL's bilinear resize filters pixels.
TOLERANCE_LEVELS = 4.0


@pytest.fixture(scope="module")
def photo(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("jpeg") / "astronaut.jpg"
    Image.fromarray(data.astronaut()).resize((500, 375)).save(path, quality=90)
    return str(path)


def test_the_box_is_torchvisions_drawn_from_the_size_alone(photo):
    image = Image.open(photo)
    for seed in range(20):
        torch.manual_seed(seed)
        ours = random_resized_crop_box(*image.size)
        torch.manual_seed(seed)
        assert ours == tuple(RandomResizedCrop.get_params(image, [0.08, 1.0], [3 / 4, 4 / 3]))


def test_the_reduction_keeps_at_least_the_output_size():
    assert jpeg_reduction((0, 0, 300, 400), 64) == 4
    assert jpeg_reduction((0, 0, 300, 400), 224) == 1
    assert jpeg_reduction((0, 0, 128, 128), 64) == 2
    assert jpeg_reduction((0, 0, 127, 400), 64) == 1
    assert jpeg_reduction((0, 0, 512, 600), 64) == 8


def test_the_box_maps_onto_the_same_place_of_the_reduced_image(tmp_path):
    canvas = np.zeros((376, 504, 3), np.uint8)
    canvas[96:224, 160:320] = 255  # a bright rectangle, on 8-pixel block edges
    path = tmp_path / "rect.jpg"
    Image.fromarray(canvas).save(path, quality=95)
    assert map_box((96, 160, 128, 160), (504, 376), (63, 47)) == (20.0, 12.0, 40.0, 28.0)
    assert map_box((96, 160, 128, 160), (500, 375), (250, 188)) == (80.0, 48.0, 160.0, 112.0)
    inside, _ = decode_crop(str(path), 16, box=(96, 160, 128, 160))  # reduction 8: 16x20 pixels of it decoded
    beside, _ = decode_crop(str(path), 16, box=(96, 320, 128, 160))
    assert np.asarray(inside).mean() > 240 and np.asarray(beside).mean() < 15


def test_reduced_decoding_equals_the_full_decode_within_tolerance(photo):
    raw = open(photo, "rb").read()
    torch.manual_seed(0)
    reductions = []
    for _ in range(30):
        reduced, box = decode_crop(raw, 48)
        full, _ = decode_crop(photo, 48, box=box, reduce=False)
        reductions.append(jpeg_reduction(box, 48))
        difference = np.abs(np.asarray(reduced, float) - np.asarray(full, float)).mean()
        assert difference < TOLERANCE_LEVELS, f"box {box}: {difference:.2f} levels"
        assert reduced.size == (48, 48) and reduced.mode == "RGB"
    assert max(reductions) >= 4  # the test did decode at reduced sizes


def test_the_dataset_draws_per_sample_and_per_worker(photo):
    dataset = ReducedCropDataset([(photo, 3)] * 8, size=32)
    torch.manual_seed(0)
    first, label = dataset[0]
    assert first.dtype == torch.uint8 and first.shape == (3, 32, 32) and label == 3
    assert len({dataset[0][0].numpy().tobytes() for _ in range(10)}) > 5
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=4, num_workers=2, generator=torch.Generator().manual_seed(0)
    )
    one, two = (batch[0] for batch in loader)  # one batch from each worker
    assert not torch.equal(one, two)


def test_a_bad_file_is_named(tmp_path):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(BadImageError, match="broken.jpg"):
        decode_crop(str(bad), 32)
    buffer = io.BytesIO()
    Image.new("L", (80, 60), 128).save(buffer, format="JPEG")
    grey, _ = decode_crop(buffer.getvalue(), 16)
    assert grey.mode == "RGB"


class TestFlip:
    """ReducedCropDataset flips about half of its samples, each drawn on its own."""

    def test_about_half_the_samples_are_flipped(self, tmp_path):
        ramp = np.repeat(np.linspace(0, 255, 32, dtype=np.uint8)[None, :, None], 32, axis=0).repeat(3, axis=2)
        Image.fromarray(ramp).save(tmp_path / "ramp.png")  # dark on the left, bright on the right
        dataset = ReducedCropDataset([(str(tmp_path / "ramp.png"), 0)] * 200, 16, scale=(1.0, 1.0), ratio=(1.0, 1.0))
        torch.manual_seed(0)
        flipped = [bool(pixels[0, :, 0].float().mean() > pixels[0, :, -1].float().mean()) for pixels, _ in dataset]
        assert 0.38 < sum(flipped) / len(flipped) < 0.62


class TestBoxAtAReducedScale:
    """jpeg_crop.map_box scales by the exact power of two a reduced JPEG was decoded at."""

    def test_a_box_maps_by_the_power_of_two_even_when_the_size_is_not_a_multiple(self):
        box = (40, 100, 200, 160)  # top, left, height, width
        full, reduced = (501, 375), (126, 94)  # libjpeg at 1/4: ceil(501 / 4), ceil(375 / 4)
        assert map_box(box, full, reduced) == (100 / 4, 40 / 4, 260 / 4, 240 / 4)
        assert map_box(box, full, full) == (100, 40, 260, 240)
