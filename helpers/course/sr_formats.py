"""The SR bench's file-format rung: the same photographs as PNG copies (written once), so the lazy-crop loader is
measured on PNG and JPEG sources alike and a ladder shows which part of its rate is the decoder's."""

from __future__ import annotations

import os
from pathlib import Path

from PIL import Image

from ..atomic import build_once
from ..images import load_rgb_image

MARKER = "PNG_COPIES.txt"


def png_copies(paths: list[Path], dest: str | os.PathLike) -> list[Path]:
    """Lossless PNG copies of `paths` (decoded once, RGB) in the folder `dest`, written once; in the same order."""
    dest = Path(dest)
    names = [f"{i:04d}_{Path(path).stem}.png" for i, path in enumerate(paths)]
    stamp = "\n".join(names)

    def build(staging: Path) -> None:
        for path, name in zip(paths, names):
            load_rgb_image(path).save(staging / name, compress_level=6)
        (staging / MARKER).write_text(stamp, encoding="utf-8")

    def complete(path: Path) -> bool:
        marker = path / MARKER
        return marker.is_file() and marker.read_text(encoding="utf-8") == stamp

    build_once(dest, build, is_complete=complete)
    return [dest / name for name in names]


def same_pixels(jpeg: Path, png: Path) -> bool:
    """True when a PNG copy decodes to exactly the pixels of its source."""
    return load_rgb_image(jpeg).tobytes() == Image.open(png).convert("RGB").tobytes()
