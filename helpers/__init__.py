"""Copyable helpers for the course "Feeding the GPU": each module holds one concern, the notebooks import from here."""

from .data import (
    DataSource,
    DatasetLayoutError,
    bsds300_split,
    check_bsds300_layout,
    cifar10_class_names,
    data_root,
    load_cifar10,
    prepare_bsds300,
    prepare_cifar10,
)
from .download import ChecksumMismatchError, IncompleteDownloadError, UnsafeArchiveError, download, safe_extract
from .env import environment_report, format_environment_report, resolve_device, seed_everything
from .images import BadImageError, ImageTooSmallError, check_crop_fits, load_rgb_image
from .profiles import Profile, resolve_profile

__all__ = [
    "BadImageError",
    "ChecksumMismatchError",
    "DataSource",
    "DatasetLayoutError",
    "ImageTooSmallError",
    "IncompleteDownloadError",
    "Profile",
    "UnsafeArchiveError",
    "bsds300_split",
    "check_bsds300_layout",
    "check_crop_fits",
    "cifar10_class_names",
    "data_root",
    "download",
    "environment_report",
    "format_environment_report",
    "load_cifar10",
    "load_rgb_image",
    "prepare_bsds300",
    "prepare_cifar10",
    "resolve_device",
    "resolve_profile",
    "safe_extract",
    "seed_everything",
]
