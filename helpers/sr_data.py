"""Super-resolution data: aligned LR/HR geometry, LR made as papers make it (MATLAB's bicubic), paired flips and
rotations, lazy random crops made in `__getitem__`, paired device augmentation, and whole-image evaluation pairs;
the options a script being replaced may need: the Y channel, PIL's resampling for LR, centre crops, DataLoader-like
batches per epoch.

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     Image.new("RGB", (90, 70)).save(f"{tmp}/0.png")
    ...     lr, hr = LazyCropSRDataset(tmp, scale=2, hr_crop=32, seed=0)[0]  # a random HR crop and its LR
    >>> lr.shape, hr.shape
    (torch.Size([3, 16, 16]), torch.Size([3, 32, 32]))
    >>> make_lr(torch.rand(3, 32, 32), 4).shape  # MATLAB's bicubic, as papers make LR
    torch.Size([3, 8, 8])

Copy with: images.py (safe decoding, uint8 to float) and resize.py (MATLAB-compatible bicubic).
Needs: numpy, pillow, torch; optional: kornia (PairedSRAugment's colour jitter).

For a decoded uint8 cache and fast crop loaders, add sr_cache.py (and atomic.py).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset, get_worker_info

from .images import check_crop_fits, host_to_device, load_rgb_image, to_uint8_tensor, to_unit_float
from .resize import downscale

SCALES = (2, 3, 4)
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp"}
CHANNELS = ("rgb", "y")
# how LR is made from HR: as SR papers make it (MATLAB's imresize), or as torchvision's Resize on a PIL image does
LR_RESAMPLING = ("matlab-bicubic", "pil-bilinear", "pil-bicubic")
_PIL_FILTERS = {"pil-bilinear": Image.Resampling.BILINEAR, "pil-bicubic": Image.Resampling.BICUBIC}
# PIL's RGB -> YCbCr Y in fixed point: (table_R[r] + table_G[g] + table_B[b]) >> 6, tables of round(64 * weight * v)
_LUMA_WEIGHTS = (0.299, 0.587, 0.114)


def list_images(folder_or_paths: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    """Return image paths: a list as given, or every image file in a folder, sorted."""
    if isinstance(folder_or_paths, (str, os.PathLike)):
        folder = Path(folder_or_paths)
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: not a folder of images; pass a folder or a list of image paths")
        paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    else:
        paths = [Path(p) for p in folder_or_paths]
    if not paths:
        raise ValueError(f"no images found in {folder_or_paths}")
    return paths


def check_sr_geometry(scale: int, hr_crop: int) -> None:
    """Raise ValueError unless `scale` is 2, 3 or 4 and `hr_crop` is a positive multiple of it."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, not {scale}")
    if hr_crop <= 0 or hr_crop % scale:
        raise ValueError(f"hr_crop={hr_crop} is not a multiple of scale={scale}: LR and HR crops could not align")


def bicubic_downscale(hr: torch.Tensor, scale: int) -> torch.Tensor:
    """LR as SR papers make it: MATLAB's antialiased bicubic downscale of a (C, H, W) or (N, C, H, W) tensor by
    `scale` (float in [0, 1], clamped; uint8 in, uint8 out, rounded like MATLAB)."""
    lr = downscale(hr, scale)
    return lr if lr.dtype == torch.uint8 else lr.clamp_(0, 1)


def check_options(channels: str, lr_resample: str) -> None:
    """Raise ValueError naming the choices unless `channels` and `lr_resample` are known."""
    if channels not in CHANNELS:
        raise ValueError(f"channels must be one of {CHANNELS}, not {channels!r}")
    if lr_resample not in LR_RESAMPLING:
        raise ValueError(f"lr_resample must be one of {LR_RESAMPLING}, not {lr_resample!r}")


def rgb_to_luma(images: torch.Tensor) -> torch.Tensor:
    """Y of full-range BT.601 (JPEG's, PIL's `convert("YCbCr")`) as a model input: (..., 3, H, W) -> (..., 1, H, W).

    uint8 in, uint8 out, equal to PIL's Y; float in [0, 1] in, float in [0, 1] out (0.299 R + 0.587 G + 0.114 B).
    Not metrics.rgb_to_y, which is the studio-range Y (16..235, float64) that PSNR-Y is computed on.
    """
    if images.shape[-3] != 3:
        raise ValueError(f"expected RGB images (..., 3, H, W), got shape {tuple(images.shape)}")
    if images.dtype == torch.uint8:
        # made where the images are (a copy of host tables each batch would make the host wait on a GPU)
        levels = torch.arange(256, dtype=torch.float64, device=images.device)
        tables = torch.stack([torch.round(64 * weight * levels) for weight in _LUMA_WEIGHTS]).to(torch.int32)
        index = images.long()
        total = tables[0][index[..., 0, :, :]] + tables[1][index[..., 1, :, :]] + tables[2][index[..., 2, :, :]]
        return (total >> 6).to(torch.uint8).unsqueeze(-3)
    weights = torch.tensor([0.299, 0.587, 0.114], dtype=images.dtype, device=images.device).view(3, 1, 1)
    return (images * weights).sum(dim=-3, keepdim=True)


def make_lr(hr: torch.Tensor, scale: int, resample: str = "matlab-bicubic") -> torch.Tensor:
    """LR from a (C, H, W) or (N, C, H, W) HR tensor: MATLAB's bicubic (`bicubic_downscale`), or PIL's antialiased
    bilinear / bicubic filter as torch computes it (`antialias=True`; measured within 1 level of 255 of PIL's own result
    for bilinear, 3 for bicubic)."""
    check_options("rgb", resample)
    if resample == "matlab-bicubic":
        return bicubic_downscale(hr, scale)
    batch = hr if hr.ndim == 4 else hr[None]
    size = (batch.shape[-2] // scale, batch.shape[-1] // scale)
    mode = resample.removeprefix("pil-")
    lr = torch.nn.functional.interpolate(to_unit_float(batch), size=size, mode=mode, antialias=True).clamp_(0, 1)
    lr = lr.mul_(255).round_().to(torch.uint8) if hr.dtype == torch.uint8 else lr
    return lr if hr.ndim == 4 else lr[0]


def epoch_batches(samples: int, batch_size: int, batches_per_epoch: int | None, drop_last: bool) -> tuple[int, int]:
    """(batches in an epoch, size of the last): `batches_per_epoch` full batches, or, when None, what a DataLoader
    over `samples` gives (a short last batch kept, unless `drop_last`)."""
    if batches_per_epoch is not None:
        return batches_per_epoch, batch_size
    full, rest = divmod(samples, batch_size)
    if full == 0:  # fewer images than a batch: one full batch (crops are drawn with replacement)
        return 1, batch_size
    return (full + 1, rest) if rest and not drop_last else (full, batch_size)


def describe_sr_batches(name: str, batches: tuple[int, int], batch_size: int, *settings: str | bool) -> str:
    """One line saying what an SR loader yields (batches, crops, flips, LR, channels), to set against a script's."""
    (count, last), (crop, augment, lr, channels) = batches, settings
    counts = f"{count} batches an epoch of {batch_size}" + (f" (the last of {last})" if last != batch_size else "")
    turns = "a random flip/rot90 per pair" if augment else "no flips or rotations"
    return f"{name}: {counts}, {crop} crops, {turns}, LR by {lr}, {str(channels).upper()} channels"


def _channels_first(image: Image.Image) -> torch.Tensor:
    """An RGB or one-channel ("L") PIL image as a uint8 (C, H, W) tensor."""
    array = np.array(image, dtype=np.uint8)  # a writable copy
    return torch.from_numpy(array.reshape(image.height, image.width, -1)).permute(2, 0, 1).contiguous()


def mod_crop(image: Image.Image, scale: int) -> Image.Image:
    """Crop an image's right and bottom edges so both sides are multiples of `scale` (the standard SR protocol)."""
    width, height = image.width - image.width % scale, image.height - image.height % scale
    return image if (width, height) == image.size else image.crop((0, 0, width, height))


# --- flips and rotations -----------------------------------------------------------------------------------------


def dihedral(tensor: torch.Tensor, choice: int) -> torch.Tensor:
    """One of the 8 flips/90-degree rotations of a (..., H, W) tensor: bit 0 flips x, bit 1 flips y, bit 2 transposes."""
    flips = [d for bit, d in ((1, -1), (2, -2)) if choice & bit]
    if flips:
        tensor = tensor.flip(flips)  # one copy at most; the transpose below is a free view
    return tensor.transpose(-1, -2) if choice & 4 else tensor


def random_dihedral(tensors: Sequence[torch.Tensor], generator: torch.Generator) -> list[torch.Tensor]:
    """Apply one random flip / 90-degree rotation (8 choices), the same one, to every (C, H, W) tensor."""
    choice = int(torch.randint(0, 8, (1,), generator=generator))
    return [dihedral(t, choice).contiguous() for t in tensors]


def paired_dihedral(
    lr: torch.Tensor, hr: torch.Tensor, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Give each (LR, HR) pair of square (B, C, h, w) / (B, C, H, W) batches its own random flip/rot90, the same on both.

    Works on whatever device the batches are on: the transforms are drawn and grouped on the host (8 groups at
    most) and their indices sent in one copy that does not make the host wait, so the cost is a few batched copies,
    not a Python loop over samples, and no host synchronisation.
    """
    if lr.shape[0] != hr.shape[0]:
        raise ValueError(f"LR and HR batches differ in size: {lr.shape[0]} vs {hr.shape[0]}")
    if lr.shape[-1] != lr.shape[-2] or hr.shape[-1] != hr.shape[-2]:
        raise ValueError(f"rot90 needs square crops, got LR {tuple(lr.shape[-2:])} and HR {tuple(hr.shape[-2:])}")
    choices = torch.randint(0, 8, (lr.shape[0],), generator=generator)  # drawn and grouped on the host
    order, counts = torch.sort(choices, stable=True)[1], torch.bincount(choices, minlength=8).tolist()
    order = host_to_device(order, lr.device)  # one asynchronous copy: the groups are slices of it
    out_lr, out_hr = torch.empty_like(lr), torch.empty_like(hr)
    start = 0
    for choice, count in enumerate(counts):
        if count:
            index = order[start : start + count]
            for source, target in ((lr, out_lr), (hr, out_hr)):
                target.index_copy_(0, index, dihedral(source.index_select(0, index), choice))
        start += count
    return out_lr, out_hr


class PairedSRAugment(torch.nn.Module):
    """Augment (LR, HR) super-resolution pairs on the device: the same random flip/rot90 and, with probability
    `jitter_p`, the same kornia ColorJitter on both images of each pair, each pair drawn independently."""

    def __init__(self, jitter: float = 0.0, jitter_p: float = 0.5) -> None:
        super().__init__()
        self.jitter = None
        if jitter > 0:
            try:  # optional: only the colour jitter needs kornia
                from kornia.augmentation import ColorJitter
            except ImportError as error:
                message = "PairedSRAugment(jitter > 0) needs kornia, which is not installed: pip install kornia"
                raise ImportError(f"{message} (jitter=0, flips and rotations only, needs only torch)") from error
            self.jitter = ColorJitter(jitter, jitter, jitter, 0.0, p=jitter_p)

    def forward(self, lr: torch.Tensor, hr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return augmented float (lr, hr) batches."""
        lr, hr = paired_dihedral(to_unit_float(lr), to_unit_float(hr))
        if self.jitter is not None:
            # draw once per pair, apply to both: colour parameters do not depend on the image size
            params = self.jitter.forward_parameters(lr.shape)
            lr, hr = self.jitter(lr, params=params), self.jitter(hr, params=params)
        return lr, hr


# --- datasets ----------------------------------------------------------------------------------------------------


class SeededDataset(Dataset):
    """Random draws from a per-process torch.Generator: each DataLoader worker (and rank) gets its own stream.

    In a worker the stream is seeded from the worker's seed, which the DataLoader derives from its own generator
    (so one seed reproduces every worker) plus the worker id (so workers differ). In the main process it is
    seeded from `seed`, or from torch's global RNG when `seed` is None.
    """

    seed: int | None

    def _generator(self) -> torch.Generator:
        info = get_worker_info()
        key = (info.id, info.seed) if info is not None else None
        if getattr(self, "_generator_key", "unset") != key:
            if info is not None:
                base = info.seed
            elif self.seed is not None:
                base = self.seed
            else:
                base = int(torch.randint(0, 2**62, (1,)))
            mixed = hashlib.blake2b(f"{base}:{self.seed}".encode(), digest_size=8).digest()
            self._rng = torch.Generator().manual_seed(int.from_bytes(mixed, "little") >> 1)
            self._generator_key = key
        return self._rng

    def _origin(self, width: int, height: int, hr_crop: int, scale: int, generator: torch.Generator) -> tuple[int, int]:
        """A random top-left corner, a multiple of `scale`, for an `hr_crop` square inside width x height."""
        max_x, max_y = (width - hr_crop) // scale, (height - hr_crop) // scale
        x = int(torch.randint(0, max_x + 1, (1,), generator=generator)) * scale
        y = int(torch.randint(0, max_y + 1, (1,), generator=generator)) * scale
        return x, y


class LazyCropSRDataset(SeededDataset):
    """Paired random crops computed in __getitem__: an HR crop at a scale-aligned origin, its LR by bicubic downscale.

    The same random flip/rot90 is applied to both (`augment`). Returns (lr, hr) floats in [0, 1] of shapes
    (C, hr_crop/scale, hr_crop/scale) and (C, hr_crop, hr_crop). PIL still decodes the whole file for a crop.
    To keep a script's behaviour: `crop="center"` (torchvision's CenterCrop), `channels="y"` (PIL's YCbCr Y, one
    channel), `lr_resample="pil-bilinear"` (torchvision's Resize on the PIL crop, made by PIL itself here).
    """

    def __init__(
        self,
        folder_or_paths: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        scale: int = 4,
        hr_crop: int = 128,
        seed: int | None = None,
        augment: bool = True,
        crop: str = "random",
        channels: str = "rgb",
        lr_resample: str = "matlab-bicubic",
    ) -> None:
        check_sr_geometry(scale, hr_crop)
        check_options(channels, lr_resample)
        if crop not in ("random", "center"):
            raise ValueError(f"crop must be 'random' or 'center', not {crop!r}")
        self.scale, self.hr_crop, self.seed, self.augment = scale, hr_crop, seed, augment
        self.crop, self.channels, self.lr_resample = crop, channels, lr_resample
        self.paths = list_images(folder_or_paths)

    def __repr__(self) -> str:
        settings = (f"{self.crop} {self.hr_crop}-px", self.augment, self.lr_resample, self.channels)
        return describe_sr_batches(type(self).__name__, (len(self), 1), 1, *settings).replace(" batches", " samples")

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        path = self.paths[index]
        image = load_rgb_image(path)
        check_crop_fits(image.size, self.hr_crop, path=path)
        generator = self._generator()
        if self.crop == "center":  # torchvision's CenterCrop: the origin rounded from the centre
            x, y = round((image.width - self.hr_crop) / 2), round((image.height - self.hr_crop) / 2)
        else:
            x, y = self._origin(image.width, image.height, self.hr_crop, self.scale, generator)
        crop = image.crop((x, y, x + self.hr_crop, y + self.hr_crop))
        if self.channels == "y":
            crop = crop.convert("YCbCr").getchannel(0)
        if self.lr_resample in _PIL_FILTERS:  # PIL itself resizes the crop, as torchvision's Resize does
            small = crop.resize((self.hr_crop // self.scale,) * 2, _PIL_FILTERS[self.lr_resample])
            hr, lr = to_unit_float(_channels_first(crop)), to_unit_float(_channels_first(small))
        else:
            hr = to_unit_float(_channels_first(crop))
            lr = bicubic_downscale(hr, self.scale)
        if self.augment:
            lr, hr = random_dihedral((lr, hr), generator)
        return lr, hr


class SREvalDataset(Dataset):
    """Whole test images by the papers' protocol: HR cropped to a multiple of the scale, LR by MATLAB's bicubic on the
    uint8 image (so LR is uint8-rounded, as a saved LR file is); (lr, hr) floats in [0, 1]."""

    def __init__(self, folder_or_paths: str | os.PathLike | Sequence[str | os.PathLike], *, scale: int = 4) -> None:
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, not {scale}")
        self.scale = scale
        self.paths = list_images(folder_or_paths)

    def __repr__(self) -> str:
        return (
            f"SREvalDataset: {len(self)} whole images x{self.scale}, HR cropped to a multiple of {self.scale}, LR by "
            "MATLAB's bicubic of the uint8 HR; (lr, hr) RGB floats in [0, 1]"
        )

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        hr = to_uint8_tensor(mod_crop(load_rgb_image(self.paths[index]), self.scale))
        return to_unit_float(bicubic_downscale(hr, self.scale)), to_unit_float(hr)
