"""The fake-CUDA harness: `cuda:0` tensors on a CPU-only machine, with every host read and host wait written down.

`fake_cuda` runs its block under torch's FakeTensorMode (torch._subclasses.fake_tensor), which makes tensors that
claim `cuda:0`, have no storage, and propagate devices as CUDA does: a CPU tensor meeting a CUDA one raises
FakeTensorDeviceMismatchError. Above it sits `DeviceTraffic`, a dispatch mode that

- runs host work for real: an op with no CUDA tensor in it executes on real CPU tensors, so a loader's random draws,
  indices and NumPy gathers have their values and the code takes the branches it takes on a GPU machine;
- keeps a shadow of every fake CUDA tensor: the same op run on real CPU copies (a CUDA device argument read as the
  CPU), so reading a device value gives the number a GPU would give, and a batch can be compared with the CPU path;
- records, with the file and line outside torch that caused it, every event that makes the host wait for the
  device on a real GPU: a host read of a device value (`.item()`, `bool(t)`, `.tolist()`, `torch.equal`), an op
  whose output shape depends on device values (`nonzero`, `unique`), a device-to-host copy, a host-to-device copy
  that is not from pinned memory with `non_blocking=True`, and an explicit `torch.cuda.synchronize`.

FakeTensorMode alone raises DataDependentOutputException on a host read (and DynamicOutputShapeException on
`nonzero`); the harness records those instead and answers from the shadow, so one run lists every read a path makes.

What cannot be faked here, and how the harness stands in (each named in the tests that rely on it):
- pinned memory: `Tensor.pin_memory()` has no fake kernel (AssertionError "NYI: aten._pin_memory.default") and a
  real one needs a driver, and a fake tensor's `is_pinned()` is always False; the harness registers a fake kernel,
  copies a real host tensor instead of pinning it, marks both pinned, and `is_pinned()` reads that mark.
- threads: dispatch modes are per thread, so a loader's background thread (CachedCropLoader's prefetch) runs
  outside the mode and would pin for real: such loaders are checked with the thread off (prefetch=0).
- streams and events: `torch.cuda.Stream()`, `current_stream()` and `Event.record()` call the driver; the harness
  replaces them with recording stand-ins (`traffic.streams` lists the calls), whose `Event.query()` says "not done".
- backward: the autograd engine starts a thread per CUDA device and asks the driver for its primary context
  ("hasPrimaryContext expects a valid device index"), so `Tensor.backward` is replaced by one that walks the graph
  and gives every leaf that requires grad a zero gradient on its own device (shapes and devices, not values).
- autocast and the GradScaler: both check `torch.cuda.is_available()`, which is False, and switch themselves off
  (autocast("cuda") then runs fp32; GradScaler("cuda") is disabled), so fp16/bf16 paths run as fp32 here.
- a module whose parameters are already fake cannot be converted again (`.to(memory_format=...)`, `.half()`):
  torch swaps FakeTensor parameters, and FakeTensorMode's weak references to them make the swap fail.
- fused optimizers (`fused=True`) initialise CUDA when they step ("Found no NVIDIA driver"): foreach and
  single-tensor optimizers run.
- a CPU `torch.Generator` passed to a CUDA random op raises on a GPU but not under FakeTensorMode: not caught here.
- a CUDA tensor made from a Python number (`torch.tensor(0.2, device="cuda")`) keeps no constant without a driver,
  so a read of it is answered from the shadow like any other (and recorded: on a GPU it is a read too).
- DDP and NCCL need processes and a driver: tests/cuda and tests/test_distributed*.py cover them.
"""

from __future__ import annotations

import contextlib
import os
import traceback
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from helpers import resize

aten = torch.ops.aten
_REAL_TOLIST = torch.Tensor.tolist  # FakeTensor overrides it
TORCH_DIR = os.path.dirname(torch.__file__)
HERE = os.path.abspath(__file__)
READS = {aten._local_scalar_dense.default, aten.equal.default, aten.is_nonzero.default}
SHAPE_FROM_VALUES = {aten.nonzero.default, aten._unique2.default, aten.unique_dim.default, aten.masked_select.default}


@dataclass(frozen=True)
class Wait:
    """One place where a real GPU would make the host wait: what it is, the first frame outside torch, and how."""

    kind: str  # "host read", "shape from values", "device-to-host copy", "host-to-device copy", "synchronize"
    where: str  # path:line (relative to the repository) of the code that did it
    detail: str = ""


def _caller() -> str:
    for frame in reversed(traceback.extract_stack()[:-2]):
        path = os.path.abspath(frame.filename)
        if path.startswith(TORCH_DIR) or path == HERE or path.endswith("contextlib.py"):
            continue
        return f"{os.path.relpath(path)}:{frame.lineno}"
    return "?"


def _on_cuda(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "cuda"


def _to_host(kwargs: dict) -> bool:
    device = kwargs.get("device")
    return device is not None and torch.device(device).type == "cpu"


def _is_cuda_device(value: Any) -> bool:
    if isinstance(value, str):  # a device string ("cuda", "cuda:1"), or any other string an op takes
        return value.split(":")[0] == "cuda"
    return isinstance(value, torch.device) and value.type == "cuda"


@dataclass
class DeviceTraffic(TorchDispatchMode):
    """The dispatch mode above FakeTensorMode (see the module docstring): real host work, shadowed device work, and
    `waits`, every host wait a real GPU would have made, in order."""

    waits: list[Wait] = field(default_factory=list)
    streams: list[tuple] = field(default_factory=list)  # the recording stand-ins' calls (wait_stream, record_stream)
    device_ops: Counter = field(default_factory=Counter)  # how often each op ran with a CUDA tensor or device in it

    def __post_init__(self) -> None:
        super().__init__()

    def wait(self, kind: str, detail: str = "") -> None:
        self.waits.append(Wait(kind, _caller(), detail))

    def tolist(self, tensor: torch.Tensor) -> Any:
        """Tensor.tolist's stand-in: one transfer on a GPU (FakeTensorMode would read element by element)."""
        self.wait("host read", f"tolist of a {tensor.dtype} device value")
        return _REAL_TOLIST(self._shadow(tensor))

    def waits_in(self, prefix: str) -> list[Wait]:
        """The waits caused by code under `prefix` (a path relative to the repository: "helpers/", "kornia")."""
        return [w for w in self.waits if w.where.startswith(prefix) or f"/{prefix}" in w.where]

    @contextlib.contextmanager
    def none_expected(self, what: str, allowed: tuple[str, ...] = ()) -> Iterator[None]:
        """Fail if the block makes the host wait, except in code under `allowed` (a dependency named by the test)."""
        start = len(self.waits)
        yield
        found = [w for w in self.waits[start:] if not any(w.where.startswith(a) or f"/{a}" in w.where for a in allowed)]
        assert not found, f"{what} made the host wait for the device: " + "; ".join(map(str, found))

    # --- the dispatch ---

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = pytree.tree_leaves((args, kwargs))
        cuda = any(_on_cuda(leaf) or _is_cuda_device(leaf) for leaf in leaves)
        if func is aten.is_pinned.default:
            return bool(getattr(args[0], "_fake_pinned", False))
        if func is aten._pin_memory.default:
            if isinstance(args[0], FakeTensor):
                return self._pinned(func(*args, **kwargs))
            return self._pinned(self._on_host(aten.clone.default, (args[0],), {}))  # a real copy, marked pinned
        if not cuda and not any(isinstance(leaf, FakeTensor) for leaf in leaves):
            return self._on_host(func, args, kwargs)
        self._note_copies(func, args, kwargs)
        self.device_ops[func.__name__] += cuda
        if func in READS:
            self.wait("host read", f"{func.__name__} of a {args[0].dtype} device value")
            return self._shadow_call(func, args, kwargs)
        if func in SHAPE_FROM_VALUES:
            self.wait("shape from values", func.__name__)
            real = self._shadow_call(func, args, kwargs)
            return pytree.tree_map_only(torch.Tensor, self._fake_like, real)
        if func is aten.copy_.default and args[0].device.type == "cpu" and not isinstance(args[0], FakeTensor):
            return args[0].copy_(self._shadow(args[1]))  # into a real host tensor: the shadow's values
        out = func(*args, **kwargs)  # FakeTensorMode: devices checked, nothing computed
        if func is aten._to_copy.default and _on_cuda(args[0]) and _to_host(kwargs):
            return self._shadow_call(func, args, kwargs)  # to the host: a real tensor with the device's values
        real = self._shadow_call(func, args, kwargs)
        for fake, shadow in zip(pytree.tree_leaves(out), pytree.tree_leaves(real)):
            if isinstance(fake, torch.Tensor) and isinstance(shadow, torch.Tensor):
                fake._fake_shadow = shadow
        return out

    def _on_host(self, func, args, kwargs):
        pin = bool(kwargs.get("pin_memory"))
        with unset_fake_temporarily():
            out = func(*args, **{**kwargs, "pin_memory": False} if pin else kwargs)
        return self._pinned(out) if pin else out

    @staticmethod
    def _pinned(tensor: torch.Tensor) -> torch.Tensor:
        tensor._fake_pinned = True
        return tensor

    def _note_copies(self, func, args, kwargs) -> None:
        if func is aten._to_copy.default:
            source, to_cuda = args[0], _is_cuda_device(kwargs.get("device"))
            pinned, non_blocking = bool(getattr(source, "_fake_pinned", False)), bool(kwargs.get("non_blocking"))
            if to_cuda and source.device.type == "cpu" and not (pinned and non_blocking):
                self.wait("host-to-device copy", f"pinned={pinned}, non_blocking={non_blocking}")
            if _on_cuda(source) and _to_host(kwargs):
                self.wait("device-to-host copy", f"non_blocking={non_blocking}")
        if func is aten.copy_.default and args[0].device.type == "cpu" and _on_cuda(args[1]):
            non_blocking = bool(args[2] if len(args) > 2 else kwargs.get("non_blocking"))
            if not (non_blocking and getattr(args[0], "_fake_pinned", False)):
                self.wait("device-to-host copy", f"into pageable memory or blocking (non_blocking={non_blocking})")

    def _shadow(self, value: Any) -> Any:
        if isinstance(value, FakeTensor):
            shadow = getattr(value, "_fake_shadow", None)
            if shadow is None:
                raise AssertionError(f"a fake tensor without a shadow ({value.device}, {tuple(value.shape)})")
            return shadow
        return torch.device("cpu") if _is_cuda_device(value) else value

    def _shadow_call(self, func, args, kwargs):
        real_args, real_kwargs = pytree.tree_map(self._shadow, (args, kwargs))
        with unset_fake_temporarily():
            return func(*real_args, **real_kwargs)

    @staticmethod
    def _fake_like(real: torch.Tensor) -> torch.Tensor:
        fake = torch.empty(real.shape, dtype=real.dtype, device="cuda")
        fake._fake_shadow = real
        return fake


class _Stream:
    """A recording stand-in for torch.cuda.Stream."""

    def __init__(self, name: str, traffic: DeviceTraffic) -> None:
        self.name, self.traffic = name, traffic

    def __repr__(self) -> str:
        return f"<{self.name} stream>"

    def wait_stream(self, other: _Stream) -> None:
        self.traffic.streams.append(("wait_stream", self.name, other.name))

    def synchronize(self) -> None:
        self.traffic.wait("synchronize", f"{self.name} stream")


class _Event:
    """A recording stand-in for torch.cuda.Event: recorded, never done when queried, waited for when synchronised."""

    def __init__(self, traffic: DeviceTraffic) -> None:
        self.traffic = traffic

    def record(self, stream: Any = None) -> None:
        self.traffic.streams.append(("event record",))

    def query(self) -> bool:
        return False

    def synchronize(self) -> None:
        self.traffic.wait("synchronize", "an event")


def _zero_grads_backward(tensor: torch.Tensor, gradient: Any = None, *args: Any, **kwargs: Any) -> None:
    """Tensor.backward's stand-in: every leaf the graph reaches gets a zero gradient of its device and shape."""
    seen, todo = set(), [tensor.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        leaf = getattr(node, "variable", None)  # AccumulateGrad nodes hold their leaf
        if leaf is not None:
            zeros = torch.zeros_like(leaf)
            leaf.grad = zeros if leaf.grad is None else leaf.grad + zeros
        todo += [child for child, _ in node.next_functions]


def real(tensor: torch.Tensor) -> torch.Tensor:
    """The values a fake CUDA tensor would hold on a GPU (its shadow), on the CPU."""
    return tensor._fake_shadow if isinstance(tensor, FakeTensor) else tensor


@contextlib.contextmanager
def fake_cuda(monkeypatch: Any) -> Iterator[DeviceTraffic]:
    """Inside the block: tensors may be made on `cuda`, and the traffic's `waits` list every host wait (see above);
    build what a user builds on the CPU (augmentations, models) before it."""
    traffic = DeviceTraffic()
    current, streams = _Stream("current", traffic), iter(range(1000))
    monkeypatch.setattr(torch.cuda, "Stream", lambda device=None, **kw: _Stream(f"side {next(streams)}", traffic))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: current)
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext(stream))
    monkeypatch.setattr(torch.cuda, "Event", lambda *a, **k: _Event(traffic))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: traffic.wait("synchronize", "the device"))
    monkeypatch.setattr(torch.Tensor, "record_stream", lambda self, s: traffic.streams.append(("record", id(self), s)))
    monkeypatch.setattr(torch.Tensor, "backward", _zero_grads_backward)
    monkeypatch.setattr(FakeTensor, "tolist", lambda self: traffic.tolist(self))  # it reads element by element
    library = torch.library.Library("aten", "FRAGMENT")  # a fake kernel for pinning fake tensors (none in torch)
    torch.library.register_fake("aten::_pin_memory", lambda x, device=None: torch.empty_like(x), lib=library)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*CUDA.*")  # autocast and the GradScaler say they are off
            with FakeTensorMode(allow_non_fake_inputs=True), traffic:
                yield traffic
    finally:
        library._destroy()
        resize._weight_matrix.cache_clear()  # it caches device tensors: fake ones must not outlive their mode
