"""The device-side RandomResizedCrop batch: boxes drawn per sample as torchvision draws them (inside each image's own
size, never in the padding), each box cut from the right place, resized like torchvision's antialiased
resized_crop within a stated tolerance, different per sample and reproducible under a generator; the whole
augmentation's output normalised in channels_last; CPU JPEG decoding gives PIL's pixels."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import RandomResizedCrop
from torchvision.transforms.v2 import functional as F

from helpers.device_crop import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    BatchRandomResizedCrop,
    crop_boxes,
    decode_jpegs,
    device_train_augment,
    pad_to_batch,
    random_resized_boxes,
)

IMAGENET = {"mean": IMAGENET_MEAN, "std": IMAGENET_STD}  # the statistics every caller now names

# Mean absolute difference allowed against torchvision's antialiased bilinear resized_crop, for images in [0, 1]:
# roi_align averages a grid of bilinear samples, torchvision applies a triangle filter (and, enlarging a box,
# repeats its edge pixel where roi_align reads half a pixel beyond it).
TOLERANCE = 0.02


def _smooth(count: int, height: int, width: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    coarse = torch.rand(count, 3, height // 8, width // 8, generator=generator)
    return torch.nn.functional.interpolate(coarse, size=(height, width), mode="bicubic", align_corners=False).clamp(
        0, 1
    )


def test_boxes_follow_torchvisions_distribution_inside_each_image():
    heights, widths = torch.tensor([375, 500] * 2000), torch.tensor([500, 375] * 2000)
    boxes = random_resized_boxes(heights, widths, generator=torch.Generator().manual_seed(0)).double()
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    assert bool((boxes[:, :2] >= 0).all() and (boxes[:, 2] <= widths).all() and (boxes[:, 3] <= heights).all())
    assert torch.equal(boxes, boxes.round())
    fraction = (w * h / (heights * widths)).numpy()
    torch.manual_seed(0)
    reference = []
    for _ in range(2000):
        _, _, th, tw = RandomResizedCrop.get_params(torch.empty(1).expand(3, 375, 500), [0.08, 1.0], [3 / 4, 4 / 3])
        reference.append(th * tw / (375 * 500))
    assert abs(fraction.mean() - np.mean(reference)) < 0.03 and abs(np.median(fraction) - np.median(reference)) < 0.04
    centre_x = ((boxes[:, 0] + boxes[:, 2]) / 2 / widths).numpy()
    assert 0.45 < centre_x.mean() < 0.55  # offsets spread over the image, not stuck at a corner


def test_impossible_scales_fall_back_to_torchvisions_centre_crop():
    boxes = random_resized_boxes(torch.tensor([100]), torch.tensor([300]), scale=(2.0, 3.0))
    assert boxes.tolist() == [[83.0, 0.0, 216.0, 100.0]]  # ratio clamped to 4/3: 133 x 100, centred (floor)


def test_each_box_is_cut_from_its_place_and_resized_like_torchvision():
    images = _smooth(6, 96, 128)
    boxes = torch.tensor(
        [[0, 0, 128, 96], [10, 20, 74, 84], [64, 0, 128, 48], [5, 7, 37, 93], [0, 48, 50, 96], [30, 30, 52, 50]],
        dtype=torch.float32,
    )
    out = crop_boxes(images, boxes, 32)
    for image, box, got in zip(images, boxes.int().tolist(), out):
        left, top, right, bottom = box
        expected = F.resized_crop(image, top, left, bottom - top, right - left, [32, 32], antialias=True)
        assert float((got - expected).abs().mean()) < TOLERANCE, box
    ramp = torch.arange(128, dtype=torch.float32).add(0.5).expand(1, 3, 96, 128)
    cut = crop_boxes(ramp, torch.tensor([[40.0, 10.0, 104.0, 74.0]]), 16)
    assert abs(float(cut.mean()) - 72.0) < 1e-3  # the box's centre column: aligned, no half-pixel shift


def test_images_of_different_sizes_are_cropped_inside_their_own_pixels():
    images = [torch.full((3, h, w), 200, dtype=torch.uint8) for h, w in [(40, 60), (90, 30), (64, 64)]]
    batch, heights, widths = pad_to_batch(images)
    assert batch.shape == (3, 3, 90, 64) and heights.tolist() == [40, 90, 64] and widths.tolist() == [60, 30, 64]
    out = BatchRandomResizedCrop(24, generator=torch.Generator().manual_seed(0))(images * 30)
    assert out.shape == (90, 3, 24, 24) and torch.allclose(out, torch.full_like(out, 200 / 255))  # no padding leaked


def test_draws_differ_per_sample_and_repeat_under_a_generator():
    image = _smooth(1, 64, 80).expand(64, -1, -1, -1)
    first = BatchRandomResizedCrop(16, generator=torch.Generator().manual_seed(3))(image)
    again = BatchRandomResizedCrop(16, generator=torch.Generator().manual_seed(3))(image)
    assert torch.equal(first, again)
    assert len({crop.numpy().round(4).tobytes() for crop in first}) > 60


def test_the_augmentation_normalises_into_channels_last():
    images = [(_smooth(1, 60, 80, seed) * 255).to(torch.uint8)[0] for seed in range(4)]
    torch.manual_seed(0)
    out = device_train_augment(32, mean=IMAGENET_MEAN, std=IMAGENET_STD)(images)
    assert out.shape == (4, 3, 32, 32) and out.is_contiguous(memory_format=torch.channels_last)
    assert bool(torch.isfinite(out).all()) and -3 < float(out.mean()) < 3


def test_cpu_decoding_gives_pils_pixels():
    pixels = (np.random.default_rng(0).random((48, 64, 3)) * 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    data = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
    (decoded,) = decode_jpegs([data])
    with Image.open(io.BytesIO(buffer.getvalue())) as image:
        reference = torch.from_numpy(np.array(image.convert("RGB"))).permute(2, 0, 1)
    assert decoded.shape == (3, 48, 64) and float((decoded.float() - reference.float()).abs().mean()) < 1.0


def test_an_integer_reduction_is_the_exact_block_average():
    """Adaptive sampling (sampling_ratio=0) samples every source pixel centre under an output pixel: cutting a whole
    128-px noise image to 16 px is an 8x8 average pool, which a single sample per bin is not."""
    noise = torch.rand(2, 3, 128, 128, generator=torch.Generator().manual_seed(0))
    whole = torch.tensor([[0.0, 0.0, 128.0, 128.0]] * 2)
    torch.testing.assert_close(crop_boxes(noise, whole, 16), torch.nn.functional.avg_pool2d(noise, 8))


def test_the_crop_uses_its_scale_and_ratio_and_224_by_default():
    images = _smooth(3, 60, 80)
    whole = BatchRandomResizedCrop(20, scale=(1.0, 1.0), ratio=(4 / 3, 4 / 3))(images)  # the only box: all of it
    torch.testing.assert_close(whole, crop_boxes(images, torch.tensor([[0.0, 0.0, 80.0, 60.0]] * 3), 20))
    assert BatchRandomResizedCrop()(images[:1]).shape == (1, 3, 224, 224)


def test_the_augmentation_crops_with_its_generator_and_jitters_as_asked():
    images = [(_smooth(1, 60, 80, seed) * 255).to(torch.uint8)[0] for seed in range(8)]

    def run(seed: int) -> torch.Tensor:
        torch.manual_seed(0)  # the flip and the jitter draw from torch's global generator: the same every time
        return device_train_augment(24, jitter=0, generator=torch.Generator().manual_seed(seed), **IMAGENET)(images)

    assert torch.equal(run(1), run(1)) and not torch.equal(run(1), run(2))  # the crop follows the generator given
    jitter = device_train_augment(jitter=0.3, **IMAGENET)[2]
    assert (jitter.brightness, jitter.contrast, jitter.saturation, jitter.hue) == (0.3, 0.3, 0.3, 0.0)
    default = device_train_augment(**IMAGENET)
    assert default[0].size == 224 and default[2].brightness == 0.2
    assert not any(type(step).__name__ == "ColorJitter" for step in device_train_augment(jitter=0, **IMAGENET))


def test_decoding_goes_to_the_library_and_device_asked_for(monkeypatch):
    """The two other paths, with recording stand-ins: torchcodec (where installed) gets the whole list, RGB, and the
    device; without it, a CUDA device gets one batched nvJPEG call."""
    from helpers import device_crop

    calls = []
    datas = [torch.zeros(4, dtype=torch.uint8), torch.ones(4, dtype=torch.uint8)]

    def fake_torchcodec(batch, mode, device):
        calls.append(("torchcodec", len(batch), mode, device))
        return [torch.zeros(3, 2, 2, dtype=torch.uint8) for _ in batch]

    monkeypatch.setattr(device_crop, "torchcodec_decode_jpeg", fake_torchcodec)
    assert device_crop.jpeg_decoder_name() == "torchcodec"
    assert len(decode_jpegs(datas, "cuda:0")) == 2
    assert calls == [("torchcodec", 2, "RGB", torch.device("cuda:0"))]

    def fake_torchvision(data, mode, device="cpu"):
        calls.append(("torchvision", type(data).__name__, mode, torch.device(device)))
        return [torch.zeros(3, 2, 2, dtype=torch.uint8)] * len(data)

    monkeypatch.setattr(device_crop, "torchcodec_decode_jpeg", None)
    monkeypatch.setattr(device_crop, "decode_jpeg", fake_torchvision)
    assert device_crop.jpeg_decoder_name() == "torchvision"
    assert len(decode_jpegs(datas, "cuda:0")) == 2
    assert calls[1:] == [("torchvision", "list", device_crop.ImageReadMode.RGB, torch.device("cuda:0"))]


def test_box_shapes_follow_torchvisions_aspect_distribution_drawn_per_sample():
    heights, widths = torch.full((4000,), 300), torch.full((4000,), 300)
    boxes = random_resized_boxes(heights, widths, generator=torch.Generator().manual_seed(1)).double()
    log_aspect = torch.log((boxes[:, 2] - boxes[:, 0]) / (boxes[:, 3] - boxes[:, 1])).numpy()
    torch.manual_seed(1)
    reference = []
    for _ in range(4000):
        _, _, th, tw = RandomResizedCrop.get_params(torch.empty(1).expand(3, 300, 300), [0.08, 1.0], [3 / 4, 4 / 3])
        reference.append(np.log(tw / th))
    assert abs(log_aspect.mean() - np.mean(reference)) < 0.02 and abs(log_aspect.std() - np.std(reference)) < 0.02
    assert (log_aspect > 0.05).mean() > 0.3 and (log_aspect < -0.05).mean() > 0.3  # wide and tall boxes both
    assert len(np.unique(log_aspect.round(3))) > 300  # every sample draws its own tries, not one set for all


@pytest.mark.parametrize(
    ("height", "width", "box_h", "box_w"), [(60, 110, 50, 100), (60, 100, 50, 100), (60, 110, 60, 100)]
)
def test_every_origin_of_a_box_is_reachable_and_top_and_left_are_drawn_apart(height, width, box_h, box_w):
    """With scale and ratio fixed so only the place is random, every top and every left occurs, the last ones
    included, and they are not the same draw; a box as wide (or as tall) as the image is legal, not the fallback."""
    count = 4000
    fraction, aspect = box_h * box_w / (height * width), box_w / box_h
    boxes = random_resized_boxes(
        torch.full((count,), height),
        torch.full((count,), width),
        scale=(fraction, fraction),
        ratio=(aspect, aspect),
        generator=torch.Generator().manual_seed(2),
    )
    assert torch.equal(boxes[:, 2] - boxes[:, 0], torch.full((count,), float(box_w)))
    assert torch.equal(boxes[:, 3] - boxes[:, 1], torch.full((count,), float(box_h)))
    left, top = boxes[:, 0].long(), boxes[:, 1].long()
    assert sorted(set(top.tolist())) == list(range(height - box_h + 1))
    assert sorted(set(left.tolist())) == list(range(width - box_w + 1))
    if height > box_h and width > box_w:
        assert abs(float(np.corrcoef(top.numpy(), left.numpy())[0, 1])) < 0.1


def test_the_fallback_centre_crop_clamps_tall_and_in_range_images_too():
    tall = random_resized_boxes(torch.tensor([300]), torch.tensor([100]), scale=(2.0, 3.0))
    assert tall.tolist() == [[0.0, 83.0, 100.0, 216.0]]  # ratio clamped to 3/4: 100 x 133, centred (floor)
    fits = random_resized_boxes(torch.tensor([100]), torch.tensor([120]), scale=(2.0, 3.0))
    assert fits.tolist() == [[0.0, 0.0, 120.0, 100.0]]  # a ratio inside the range: the whole image


@pytest.mark.parametrize("error", ["RuntimeError", "OSError"])  # ImportError: where it is not installed, as here
def test_a_torchcodec_that_cannot_load_its_libraries_falls_back_to_torchvision(tmp_path, error):
    """torchcodec installed without the FFmpeg (or CUDA NPP) libraries it needs raises on import: the module still
    imports, and decodes with torchvision."""
    fake = tmp_path / "torchcodec"
    (fake / "decoders").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "decoders" / "__init__.py").write_text(f"raise {error}('libavutil.so.59: cannot open shared object')\n")
    code = "import helpers.device_crop as d; print(d.jpeg_decoder_name())"
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "torchvision"
