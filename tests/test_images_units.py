"""images.py's one uint8-to-float place divides by 255 and leaves floats alone, to_uint8_tensor keeps height and
width apart, and a crop that fits in one direction only is still too big."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.images import ImageTooSmallError, check_crop_fits, to_uint8_tensor, to_unit_float


def test_uint8_becomes_float_in_unit_range_and_floats_pass_through():
    pixels = torch.tensor([0, 1, 128, 255], dtype=torch.uint8)
    assert torch.equal(to_unit_float(pixels), torch.tensor([0, 1, 128, 255], dtype=torch.float32) / 255)
    assert float(to_unit_float(pixels)[-1]) == 1.0
    already = torch.tensor([0.25, 0.5])
    assert torch.equal(to_unit_float(already), torch.tensor([0.25, 0.5]))  # not divided again (not even in place)


def test_to_uint8_tensor_is_channels_height_width():
    array = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)  # height 2, width 3, RGB
    tensor = to_uint8_tensor(array)
    assert tensor.shape == (3, 2, 3) and tensor.is_contiguous()
    assert torch.equal(tensor[:, 1, 2], torch.from_numpy(array[1, 2]))


@pytest.mark.parametrize("size", [(10, 40), (40, 10)])
def test_a_crop_too_big_in_one_direction_is_refused(size):
    check_crop_fits((40, 40), 16)
    with pytest.raises(ImageTooSmallError, match=r"p.png: image is \d+x\d+ pixels, smaller than the 16x16 crop"):
        check_crop_fits(size, 16, path="p.png")
