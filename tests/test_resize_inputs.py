"""imresize's input checks at their edges: one-pixel images and one-pixel outputs are legal, an empty side or an
infinite scale is refused, and each refusal names what was given."""

from __future__ import annotations

import math
import re

import pytest
import torch

from helpers.resize import imresize


def test_one_pixel_images_and_one_pixel_outputs_are_legal():
    column = torch.rand(1, 3, 5, 1)
    assert imresize(column, 2).shape == (1, 3, 10, 2)
    assert imresize(torch.rand(3, 1, 4), 2).shape == (3, 2, 8)
    assert imresize(torch.rand(1, 3, 6, 8), size=(1, 1)).shape == (1, 3, 1, 1)
    flat = torch.full((1, 3, 6, 8), 0.25)
    torch.testing.assert_close(imresize(flat, size=(1, 3)), torch.full((1, 3, 1, 3), 0.25))


@pytest.mark.parametrize("shape", [(1, 3, 4, 0), (1, 3, 0, 4), (3, 5, 0), (4, 4)])
def test_an_empty_side_or_a_missing_channel_axis_is_refused_with_the_shape(shape):
    with pytest.raises(ValueError, match=re.escape(f"got shape {shape}")):
        imresize(torch.rand(shape), 2)


@pytest.mark.parametrize("scale", [math.inf, -math.inf, 0, -2, math.nan, True])
def test_a_scale_that_is_not_a_positive_finite_number_is_refused(scale):
    with pytest.raises(ValueError, match="scale must be a positive finite number"):
        imresize(torch.rand(1, 3, 4, 4), scale)


@pytest.mark.parametrize("size", [(0, 4), (4, 0), (4,), (2.0, 3), (True, 3)])
def test_a_size_that_is_not_two_positive_ints_is_refused(size):
    with pytest.raises(ValueError, match="size must be"):
        imresize(torch.rand(1, 3, 4, 4), size=size)


def test_a_non_tensor_is_refused_by_its_type():
    with pytest.raises(TypeError, match="not list"):
        imresize([[0.0]], 2)


def test_scale_and_size_together_or_neither_are_refused_saying_so():
    for arguments in ({}, {"scale": 2, "size": (4, 4)}):
        with pytest.raises(ValueError, match="^" + re.escape("pass exactly one of scale (a factor: 0.25 shrinks by 4")):
            imresize(torch.rand(1, 3, 4, 4), **arguments)


def test_a_2d_image_is_told_to_add_a_channel_axis():
    with pytest.raises(ValueError, match="; " + re.escape("give a 2-D image a channel axis with image[None]") + "$"):
        imresize(torch.rand(4, 4), 2)
