"""Bad images: a clear error naming the file, or a correct conversion to 8-bit RGB."""

from __future__ import annotations

import os
import socket
import struct
import tracemalloc
import zlib

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.images import (
    BadImageError,
    ImageTooSmallError,
    check_crop_fits,
    image_census,
    image_header,
    load_rgb_image,
    to_uint8_tensor,
    to_unit_float,
)
from helpers.jpeg_crop import ReducedCropDataset, decode_crop


@pytest.fixture
def colours() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)


def test_rgb_png_round_trips(tmp_path, colours):
    Image.fromarray(colours).save(tmp_path / "a.png")
    image = load_rgb_image(tmp_path / "a.png")
    assert image.mode == "RGB" and np.array_equal(np.asarray(image), colours)


def test_grayscale_becomes_three_equal_channels(tmp_path, colours):
    gray = colours[..., 0]
    Image.fromarray(gray).save(tmp_path / "g.png")
    rgb = np.asarray(load_rgb_image(tmp_path / "g.png"))
    assert rgb.shape == (20, 30, 3) and all(np.array_equal(rgb[..., c], gray) for c in range(3))


def test_rgba_drops_alpha_and_keeps_colour(tmp_path, colours):
    rgba = np.concatenate([colours, np.full((20, 30, 1), 7, np.uint8)], axis=-1)
    Image.fromarray(rgba).save(tmp_path / "a.png")
    assert np.array_equal(np.asarray(load_rgb_image(tmp_path / "a.png")), colours)


def test_cmyk_jpeg_is_converted(tmp_path):
    Image.new("CMYK", (16, 16), (0, 255, 255, 0)).save(tmp_path / "c.jpg", quality=100)  # pure red in CMYK
    rgb = np.asarray(load_rgb_image(tmp_path / "c.jpg")).astype(int)
    assert rgb.shape == (16, 16, 3)
    assert rgb[..., 0].mean() > 240 and rgb[..., 1].mean() < 15 and rgb[..., 2].mean() < 15


def test_sixteen_bit_grayscale_is_scaled_not_clipped(tmp_path):
    values = np.array([[0, 257, 32896, 65535]], dtype=np.uint16)  # 0, 1, 128, 255 in 8 bits
    Image.fromarray(values).save(tmp_path / "d.png")
    assert Image.open(tmp_path / "d.png").mode.startswith("I")
    rgb = np.asarray(load_rgb_image(tmp_path / "d.png"))
    assert rgb[0, :, 0].tolist() == [0, 1, 128, 255] and np.array_equal(rgb[..., 0], rgb[..., 2])


def test_palette_image_is_converted(tmp_path, colours):
    Image.fromarray(colours).convert("P").save(tmp_path / "p.png")
    assert load_rgb_image(tmp_path / "p.png").mode == "RGB"


def test_corrupt_file_is_named(tmp_path):
    path = tmp_path / "corrupt.jpg"
    path.write_bytes(b"this is not an image at all")
    with pytest.raises(BadImageError, match="corrupt.jpg.*cannot decode"):
        load_rgb_image(path)


@pytest.mark.parametrize("suffix", ["jpg", "png"])
def test_truncated_file_is_named(tmp_path, colours, suffix):
    path = tmp_path / f"whole.{suffix}"
    big = np.tile(colours, (20, 20, 1))
    Image.fromarray(big).save(path)
    cut = tmp_path / f"truncated.{suffix}"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(BadImageError, match=f"truncated.{suffix}"):
        load_rgb_image(cut)


def test_float_image_is_refused_with_its_mode(tmp_path):
    path = tmp_path / "f.tiff"
    Image.fromarray(np.zeros((4, 4), np.float32)).save(path)
    with pytest.raises(BadImageError, match="f.tiff.*'F'"):
        load_rgb_image(path)


def test_image_smaller_than_the_crop_is_named():
    check_crop_fits((481, 321), 128, path="ok.jpg")
    with pytest.raises(ImageTooSmallError, match=r"tiny.jpg: image is 100x90 pixels, smaller than the 128x128"):
        check_crop_fits((100, 90), 128, path="tiny.jpg")


def _png_header_only(path, width: int, height: int) -> None:
    """A PNG whose header claims width x height RGB pixels (no pixel data: PIL refuses it before decoding)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b""))


def test_a_decompression_bomb_is_named_with_what_to_do(tmp_path):
    path = tmp_path / "huge.png"
    _png_header_only(path, 50_000, 50_000)
    for read in (load_rgb_image, image_header, lambda p: image_census([p])):
        with pytest.raises(BadImageError, match=r"huge.png: .*decompression bomb.*MAX_IMAGE_PIXELS") as info:
            read(path)
        assert "corrupt" not in str(info.value)  # it is not damaged: it is too big to decode safely


def test_a_mode_i_image_of_8_bit_values_is_not_scaled_as_16_bit(tmp_path):
    values = np.array([[0, 1, 128, 255]], dtype=np.int32)
    Image.fromarray(values).save(tmp_path / "eight.tiff")  # a 32-bit integer TIFF holding 0..255
    with Image.open(tmp_path / "eight.tiff") as image:
        assert image.mode == "I"
    rgb = np.asarray(load_rgb_image(tmp_path / "eight.tiff"))
    assert rgb[0, :, 0].tolist() == [0, 1, 128, 255] and np.array_equal(rgb[..., 0], rgb[..., 1])
    wide = np.array([[0, 257, 32896, 65535]], dtype=np.int32)  # the same container holding 16-bit values
    Image.fromarray(wide).save(tmp_path / "sixteen.tiff")
    assert np.asarray(load_rgb_image(tmp_path / "sixteen.tiff"))[0, :, 0].tolist() == [0, 1, 128, 255]


def test_a_dark_16_bit_file_opened_as_mode_i_is_still_scaled(tmp_path):
    # A 16-bit PGM opens as mode "I"; its values are 16-bit even when they are all small. The file is written byte by
    # byte (binary PGM: header, then big-endian 16-bit samples, as maxval > 255 asks): Pillow reads such files from
    # 10.1 on, but 10.1 (the oldest release the course admits) cannot write them.
    pixels = np.array([[0, 100, 255]], dtype=">u2")
    (tmp_path / "dark.pgm").write_bytes(b"P5\n3 1\n65535\n" + pixels.tobytes())
    with Image.open(tmp_path / "dark.pgm") as image:
        assert image.mode == "I"
    assert np.asarray(load_rgb_image(tmp_path / "dark.pgm"))[0, :, 0].tolist() == [0, 0, 1]


def test_header_reading_names_a_file_that_is_not_an_image(tmp_path):
    (tmp_path / "notes.png").write_text("not an image")
    with pytest.raises(BadImageError, match="notes.png: cannot read the image header"):
        image_census([tmp_path / "notes.png"])


# --- special files where an image is expected; 16-bit without wide temporaries -----------------------------------


def _special_files(tmp_path) -> dict[str, str]:
    """A FIFO, a folder and a link to /dev/zero, each named like an image, with what the error must call it."""
    os.mkfifo(tmp_path / "fifo.png")
    (tmp_path / "folder.png").mkdir()
    (tmp_path / "zero.png").symlink_to("/dev/zero")
    return {"fifo.png": r"a FIFO \(named pipe\)", "folder.png": "a directory", "zero.png": "a character device"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("read", [load_rgb_image, image_header])
def test_special_files_are_named_not_read_forever(tmp_path, read):
    for name, what in _special_files(tmp_path).items():
        with pytest.raises(BadImageError, match=f"{name}: is {what}, not an image file"):
            read(tmp_path / name)


def test_a_link_to_a_real_image_is_read(tmp_path, colours):
    Image.fromarray(colours).save(tmp_path / "real.png")
    (tmp_path / "link.png").symlink_to(tmp_path / "real.png")
    assert np.array_equal(np.asarray(load_rgb_image(tmp_path / "link.png")), colours)


def test_sixteen_bit_images_are_converted_without_wide_temporaries(tmp_path):
    values = (np.arange(1000 * 1000, dtype=np.uint32) % 65536).astype(np.uint16).reshape(1000, 1000)
    Image.fromarray(values).save(tmp_path / "big.png")
    tracemalloc.start()
    try:
        rgb = load_rgb_image(tmp_path / "big.png")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.asarray(rgb)[0, 257, 0] == 1 and np.asarray(rgb)[65, 535, 0] == 255
    assert peak < 12 * values.size, f"{peak / values.size:.1f} bytes a pixel (int64 temporaries take 17)"


def test_an_image_exactly_the_crop_size_fits():
    check_crop_fits((128, 128), 128, path="exact.jpg")
    with pytest.raises(ImageTooSmallError, match="exact.jpg"):
        check_crop_fits((128, 127), 128, path="exact.jpg")


class TestSocketsAndBombs:
    """A socket where an image should be is named as one (it cannot even be opened: ENXIO, which read as 'corrupt or
    truncated'), and a decompression bomb met by the reduced-size decoder gets the bomb's own advice (raise
    MAX_IMAGE_PIXELS if the file is trusted), not 'download it again'."""

    def test_a_socket_where_an_image_should_be_is_named(self, tmp_path):
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(tmp_path / "photo.png"))
        try:
            for read in (load_rgb_image, image_header, lambda p: decode_crop(p, 8)):
                with pytest.raises(BadImageError, match="photo.png: is a socket, not an image file"):
                    read(tmp_path / "photo.png")
        finally:
            server.close()

    def test_a_decompression_bomb_gets_the_bombs_advice_from_decode_crop(self, tmp_path):
        Image.new("RGB", (8, 8)).save(tmp_path / "bomb.jpg", quality=5)
        data = bytearray((tmp_path / "bomb.jpg").read_bytes())
        frame = data.find(b"\xff\xc0")  # the frame header: its height and width claim 60000 x 60000
        data[frame + 5 : frame + 9] = (60000).to_bytes(2, "big") * 2
        (tmp_path / "bomb.jpg").write_bytes(bytes(data))
        for read in (lambda p: decode_crop(p, 16), lambda p: ReducedCropDataset([(str(p), 0)], 16)[0]):
            with pytest.raises(BadImageError, match="bomb.jpg: .*decompression bomb; if you trust the file, raise"):
                read(tmp_path / "bomb.jpg")


class TestConversionsAndCropFit:
    """images.py's one uint8-to-float place divides by 255 and leaves floats alone, to_uint8_tensor keeps height and
    width apart, and a crop that fits in one direction only is still too big."""

    def test_uint8_becomes_float_in_unit_range_and_floats_pass_through(self):
        pixels = torch.tensor([0, 1, 128, 255], dtype=torch.uint8)
        assert torch.equal(to_unit_float(pixels), torch.tensor([0, 1, 128, 255], dtype=torch.float32) / 255)
        assert float(to_unit_float(pixels)[-1]) == 1.0
        already = torch.tensor([0.25, 0.5])
        assert torch.equal(to_unit_float(already), torch.tensor([0.25, 0.5]))  # not divided again (not even in place)

    def test_to_uint8_tensor_is_channels_height_width(self):
        array = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)  # height 2, width 3, RGB
        tensor = to_uint8_tensor(array)
        assert tensor.shape == (3, 2, 3) and tensor.is_contiguous()
        assert torch.equal(tensor[:, 1, 2], torch.from_numpy(array[1, 2]))

    @pytest.mark.parametrize("size", [(10, 40), (40, 10)])
    def test_a_crop_too_big_in_one_direction_is_refused(self, size):
        check_crop_fits((40, 40), 16)
        with pytest.raises(ImageTooSmallError, match=r"p.png: image is \d+x\d+ pixels, smaller than the 16x16 crop"):
            check_crop_fits(size, 16, path="p.png")


class TestIntegerImageRange:
    """A 32-bit integer image past 16-bit values is refused."""

    def test_an_integer_image_past_16_bit_values_is_refused(self, tmp_path):
        Image.fromarray(np.array([[0, 70000]], dtype=np.int32)).save(tmp_path / "wide.tiff")
        with pytest.raises(BadImageError, match=r"wide.tiff: mode I holds values 0..70000, outside 16-bit"):
            load_rgb_image(tmp_path / "wide.tiff")
