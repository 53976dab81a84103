"""Shared fixtures: a loopback HTTP server that serves archives the tests build, with Range and cut-short transfers;
and the `cuda` marker: CUDA tests run by default where a GPU is visible and are skipped, with the reason, elsewhere."""

from __future__ import annotations

import io
import os
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.course.standins import skimage_photo
from helpers.sr_data import bicubic_downscale

REQUIRE_CUDA_ENV_VAR = "COURSE_REQUIRE_CUDA"  # 1: a missing GPU stops the run instead of skipping the CUDA tests


def cuda_missing_reason() -> str | None:
    """Why the CUDA tests cannot run here, or None when a CUDA device is visible."""
    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        return f"CUDA is not available: torch {torch.__version__} is a CPU-only build"
    return f"CUDA is not available: torch {torch.__version__} (built for CUDA {torch.version.cuda}) sees no GPU"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cuda: needs a CUDA GPU; runs by default where one is visible, skipped with the reason elsewhere "
        f"({REQUIRE_CUDA_ENV_VAR}=1 makes a missing GPU an error: make test-gpu sets it)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = cuda_missing_reason()
    cuda_items = [item for item in items if item.get_closest_marker("cuda") is not None]
    if reason is None or not cuda_items:
        return
    if os.environ.get(REQUIRE_CUDA_ENV_VAR) == "1":
        raise pytest.UsageError(
            f"{REQUIRE_CUDA_ENV_VAR}=1 asks for the {len(cuda_items)} CUDA tests to run, but {reason}. Run on a "
            f"machine with an NVIDIA GPU and a CUDA build of torch, or unset {REQUIRE_CUDA_ENV_VAR} to skip them."
        )
    skip = pytest.mark.skip(reason=f"{reason}; the CUDA tests run where a GPU is visible (make test-gpu)")
    for item in cuda_items:
        item.add_marker(skip)


class LoopbackServer:
    """Serves `files` (url path -> bytes); `cut_after[path] = n` sends n bytes of a longer declared length, then
    hangs up; `range_start[path] = n` answers every Range request with a 206 from byte n (a broken server)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.cut_after: dict[str, int] = {}
        self.range_start: dict[str, int] = {}
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                range_header = self.headers.get("Range")
                server.requests.append((self.path, range_header))
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                start = int(range_header.split("=")[1].split("-")[0]) if range_header else 0
                if range_header and self.path in server.range_start:
                    start = server.range_start[self.path]
                if start >= len(body) and range_header:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(body)}")
                    self.end_headers()
                    return
                payload = body[start:]
                self.send_response(206 if range_header else 200)
                if range_header:
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                cut = server.cut_after.pop(self.path, None)
                self.wfile.write(payload if cut is None else payload[:cut])
                self.wfile.flush()
                if cut is not None:
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        """The full loopback URL of a served path."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def close(self) -> None:
        """Stop serving."""
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def http_server():
    server = LoopbackServer()
    yield server
    server.close()


def jpeg_bytes(width: int, height: int, seed: int = 0) -> bytes:
    """A small real JPEG of random colours."""
    rng = np.random.default_rng(seed)
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(buffer, format="JPEG")
    return buffer.getvalue()


def tar_bytes(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    """A tar archive (gzip by default) holding regular files `members` (name -> content)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


@pytest.fixture(scope="session")
def photo_dir(tmp_path_factory):
    """Six smooth-but-detailed RGB PNGs of BSDS-like and odd sizes (odd sizes exercise the mod-crop)."""
    folder = tmp_path_factory.mktemp("photos")
    astronaut = skimage_photo("astronaut")  # skimage.data's pixels, read without SciPy (the GPU check has none)
    for i, (h, w) in enumerate([(321, 481), (481, 321), (250, 303), (300, 451), (257, 258), (321, 481)]):
        y, x = (i * 17) % (512 - h + 1), (i * 29) % (512 - w + 1)
        Image.fromarray(np.ascontiguousarray(astronaut[y : y + h, x : x + w])).save(folder / f"img{i}.png")
    return folder


def interior_gap(lr: torch.Tensor, hr: torch.Tensor, scale: int, border: int = 2) -> float:
    """Max |bicubic_downscale(hr) - lr| away from the crop border (where the filter sees outside the crop)."""
    expected = bicubic_downscale(hr, scale)
    window = (..., slice(border, -border), slice(border, -border))
    return float((expected[window] - lr[window]).abs().max())


def shifted_gap(lr: torch.Tensor, hr: torch.Tensor, scale: int) -> float:
    """The same gap with HR moved by one LR pixel: what misalignment would look like."""
    return interior_gap(lr[..., 1:, 1:], hr[..., :-scale, :-scale], scale)
