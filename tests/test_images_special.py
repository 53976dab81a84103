"""A socket where an image should be is named as one (it cannot even be opened: ENXIO, which read as 'corrupt or
truncated'), and a decompression bomb met by the reduced-size decoder gets the bomb's own advice (raise
MAX_IMAGE_PIXELS if the file is trusted), not 'download it again'."""

from __future__ import annotations

import socket

import pytest
from PIL import Image

from helpers.images import BadImageError, image_header, load_rgb_image
from helpers.jpeg_crop import ReducedCropDataset, decode_crop


def test_a_socket_where_an_image_should_be_is_named(tmp_path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "photo.png"))
    try:
        for read in (load_rgb_image, image_header, lambda p: decode_crop(p, 8)):
            with pytest.raises(BadImageError, match="photo.png: is a socket, not an image file"):
                read(tmp_path / "photo.png")
    finally:
        server.close()


def test_a_decompression_bomb_gets_the_bombs_advice_from_decode_crop(tmp_path):
    Image.new("RGB", (8, 8)).save(tmp_path / "bomb.jpg", quality=5)
    data = bytearray((tmp_path / "bomb.jpg").read_bytes())
    frame = data.find(b"\xff\xc0")  # the frame header: its height and width claim 60000 x 60000
    data[frame + 5 : frame + 9] = (60000).to_bytes(2, "big") * 2
    (tmp_path / "bomb.jpg").write_bytes(bytes(data))
    for read in (lambda p: decode_crop(p, 16), lambda p: ReducedCropDataset([(str(p), 0)], 16)[0]):
        with pytest.raises(BadImageError, match="bomb.jpg: .*decompression bomb; if you trust the file, raise"):
            read(tmp_path / "bomb.jpg")
