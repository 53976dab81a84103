"""Batched nvJPEG on fake CUDA: a file nvJPEG cannot decode (a CMYK JPEG) falls back to the CPU for that file
alone, its pixels copied to the device without a host wait, and the rest of the batch stays on the GPU."""

from __future__ import annotations

import io

import numpy as np
import torch
from PIL import Image
from torchvision.io import ImageReadMode
from torchvision.io import decode_jpeg as cpu_decode_jpeg

from helpers import device_crop
from helpers.device_crop import decode_jpegs

from .harness import real


def _jpeg(mode: str, seed: int) -> torch.Tensor:
    pixels = np.random.default_rng(seed).integers(0, 256, (24, 32, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(buffer, format="JPEG", quality=95)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def test_a_cmyk_jpeg_is_decoded_on_the_cpu_and_the_rest_of_the_batch_on_the_gpu(fake_cuda, monkeypatch):
    datas = [_jpeg("RGB", 0), _jpeg("CMYK", 1), _jpeg("RGB", 2)]
    cmyk = {datas[1].data_ptr()}
    calls: list[tuple[str, int]] = []

    def nvjpeg(data, mode, device="cpu"):
        """torchvision's decode_jpeg as a GPU runs it: nvJPEG refuses CMYK, in a batch or alone."""
        batch = data if isinstance(data, list) else [data]
        calls.append((torch.device(device).type, len(batch)))
        if torch.device(device).type == "cuda" and any(d.data_ptr() in cmyk for d in batch):
            raise RuntimeError("nvjpegDecodeBatchedPhaseOne failed: NVJPEG_STATUS_JPEG_NOT_SUPPORTED")
        out = [cpu_decode_jpeg(d, mode=mode).to(device) for d in batch]
        return out if isinstance(data, list) else out[0]

    monkeypatch.setattr(device_crop, "torchcodec_decode_jpeg", None)
    monkeypatch.setattr(device_crop, "decode_jpeg", nvjpeg)
    with fake_cuda() as traffic:
        # the stand-in's own copy plays nvJPEG writing to the GPU: only the library's code is checked
        with traffic.none_expected("decoding a batch with a CMYK file in it", allowed=("tests/fake_cuda/",)):
            decoded = decode_jpegs(datas, "cuda")
    assert calls == [("cuda", 3), ("cuda", 1), ("cuda", 1), ("cpu", 1), ("cuda", 1)]  # the batch, then file by file
    assert [image.device.type for image in decoded] == ["cuda"] * 3
    for data, image in zip(datas, decoded):
        assert torch.equal(real(image), cpu_decode_jpeg(data, mode=ImageReadMode.RGB))
