"""LazyCropSRDataset's centre crop is torchvision's CenterCrop to the pixel (its rounding of a half-pixel margin),
and in a DataLoader worker the dataset's own seed still changes the crops drawn."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from PIL import Image
from torchvision.transforms.functional import center_crop, pil_to_tensor

from helpers import sr_data
from helpers.sr_data import LazyCropSRDataset


def _photo(tmp_path, width: int, height: int):
    rng = np.random.default_rng(width * height)
    path = tmp_path / f"p{width}x{height}.png"
    Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(path)
    return path


def test_the_centre_crop_is_torchvisions_with_odd_margins(tmp_path):
    for width, height in ((23, 30), (30, 25), (27, 27)):
        path = _photo(tmp_path, width, height)
        _, hr = LazyCropSRDataset([path], scale=2, hr_crop=8, crop="center", augment=False)[0]
        expected = center_crop(pil_to_tensor(Image.open(path).convert("RGB")), [8, 8])
        assert torch.equal((hr * 255).round().to(torch.uint8), expected), (width, height)


def test_in_a_worker_the_datasets_seed_still_changes_the_crops(tmp_path, monkeypatch):
    path = _photo(tmp_path, 64, 64)
    monkeypatch.setattr(sr_data, "get_worker_info", lambda: SimpleNamespace(id=0, seed=1234))

    def crops(seed: int) -> list[torch.Tensor]:
        dataset = LazyCropSRDataset([path], scale=2, hr_crop=8, seed=seed)
        return [dataset[0][1] for _ in range(4)]

    assert all(torch.equal(a, b) for a, b in zip(crops(0), crops(0)))
    assert not all(torch.equal(a, b) for a, b in zip(crops(0), crops(1)))
