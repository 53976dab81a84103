"""The training step, evaluation and the side-stream prefetcher on fake CUDA: a model and its preprocessing built on
the CPU and moved, micro-batches from the host, no device mismatch, and no host wait between the checks that are
documented as the only ones (TrainStep's end of epoch; evaluation's one read of its totals).

Backward runs on the harness's stand-in (zero gradients of each leaf's device and shape: the autograd engine needs
a driver), and autocast and the GradScaler switch themselves off without CUDA, so these steps run in fp32 (the fp16
scale read is counted by tests/test_step.py on the CPU). TrainStep(channels_last=True) is not run here: converting
a model whose parameters are already fake (`.to(memory_format=...)`) makes torch swap each FakeTensor parameter,
and FakeTensorMode's own weak references to them make the swap fail ("Cannot swap t1 because it has weakref")."""

from __future__ import annotations

import torch
from torch import nn

from helpers.augment import CIFAR10_MEAN, CIFAR10_STD, normalize_only
from helpers.evaluation import evaluate_classifier, evaluate_sr
from helpers.prefetch import PrefetchLoader
from helpers.step import TrainStep

from .harness import real


def _convnet() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4)
    )


def test_a_train_step_on_cuda_waits_for_the_device_only_at_the_end_of_the_epoch(fake_cuda):
    model = _convnet()  # built on the CPU, moved below as a user moves it
    generator = torch.Generator().manual_seed(1)
    batches = [
        (torch.randint(0, 256, (4, 3, 16, 16), dtype=torch.uint8, generator=generator), torch.tensor([0, 1, 2, 3]))
        for _ in range(6)
    ]
    with fake_cuda() as traffic:
        model.to("cuda")
        step = TrainStep(
            model,
            torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
            nn.CrossEntropyLoss(),
            device="cuda",
            accumulation_steps=2,
            max_grad_norm=1.0,
            batch_transform=normalize_only(
                CIFAR10_MEAN, CIFAR10_STD
            ),  # a module built on the CPU, with CPU buffers: the step moves it
        )
        on_device = [(images.to("cuda"), labels.to("cuda")) for images, labels in batches]
        with traffic.none_expected("TrainStep's micro-batches"):
            results = [step(images, labels) for images, labels in on_device]
        assert step.optimizer_steps == 3 and all(r.loss.device.type == "cuda" for r in results)
        start = len(traffic.waits)
        step.end_epoch()  # documented: waits for the device and reads every flag
        at_the_end = traffic.waits[start:]
    assert [w.kind for w in at_the_end] == ["synchronize"] * len(at_the_end) and at_the_end
    assert all(w.where.startswith("helpers/step.py") for w in at_the_end)
    assert all(p.device.type == "cuda" and p.grad is None for p in model.parameters())  # zero_grad(set_to_none)
    assert all(torch.isfinite(real(r.loss)) for r in results)


def test_evaluation_reads_its_totals_once(fake_cuda):
    model = _convnet()
    images = torch.randint(0, 256, (40, 3, 16, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
    labels = torch.arange(40) % 4
    expected = evaluate_classifier(
        model, images, labels, preprocess=normalize_only(CIFAR10_MEAN, CIFAR10_STD), device="cpu", batch_size=16
    )
    with fake_cuda() as traffic:
        model.to("cuda")
        result = evaluate_classifier(
            model, images, labels, preprocess=normalize_only(CIFAR10_MEAN, CIFAR10_STD), device="cuda", batch_size=16
        )
    reads = [w for w in traffic.waits if w.kind in ("host read", "device-to-host copy")]
    assert len(reads) == 1 and reads[0].where.startswith("helpers/evaluation.py"), reads  # 3 batches, one read
    assert result == expected


def test_sr_evaluation_reads_every_images_scores_once(fake_cuda):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(3, 3, 3, padding=1))
    generator = torch.Generator().manual_seed(3)
    pairs = [
        (torch.rand(3, 12 + 2 * i, 10, generator=generator), torch.rand(3, 24 + 4 * i, 20, generator=generator))
        for i in range(3)
    ]
    expected = evaluate_sr(model, pairs, scale=2, device="cpu")
    with fake_cuda() as traffic:
        model.to("cuda")
        result = evaluate_sr(model, pairs, scale=2, device="cuda")
    reads = [w for w in traffic.waits if w.kind in ("host read", "device-to-host copy")]
    assert len(reads) == 1 and reads[0].where.startswith("helpers/evaluation.py"), reads
    assert result["per_image_psnr_y"] == expected["per_image_psnr_y"] and len(result["per_image_psnr_y"]) == 3


def test_the_prefetcher_waits_for_the_current_stream_before_converting_a_batch_already_on_the_gpu(fake_cuda):
    """A loader that makes its batches on the GPU (on the current stream) hands PrefetchLoader tensors that the side
    stream must not read before they are made, nor free while it reads them; host batches need neither."""
    host = [torch.randint(0, 256, (2, 3, 4, 4), dtype=torch.uint8) for _ in range(3)]
    with fake_cuda() as traffic:
        on_gpu = [images.to("cuda") for images in host]  # made on the device, on the current stream
        converted = list(PrefetchLoader(on_gpu, "cuda"))
        waits = [call for call in traffic.streams if call[0] == "wait_stream"]
        side_waits = [call for call in waits if call[1].startswith("side")]
        records = [call for call in traffic.streams if call[0] == "record"]
        assert len(side_waits) == 3 and all(call[2] == "current" for call in side_waits)
        assert {id(t) for t in on_gpu} <= {call[1] for call in records if str(call[2]).startswith("<side")}
        assert len(waits) - len(side_waits) == 3  # and the current stream waits for the side stream, as before
        traffic.streams.clear()
        pinned = [images.pin_memory() for images in host]
        with traffic.none_expected("PrefetchLoader's host batches"):
            from_host = list(PrefetchLoader(pinned, "cuda"))
        assert not [call for call in traffic.streams if call[0] == "wait_stream" and call[1].startswith("side")]
    for got, again, want in zip(converted, from_host, host):
        assert got.device.type == "cuda" and got.dtype == torch.float32
        torch.testing.assert_close(real(got), want.float() / 255)
        torch.testing.assert_close(real(again), want.float() / 255)


def test_the_speed_up_table_leaves_cudnn_benchmark_untimed_on_cuda_and_the_flag_as_it_was(fake_cuda, monkeypatch):
    """In one process the plain row fills cuDNN's per-shape algorithm cache, which benchmark=True only searches on
    a miss, and the flag is global: a cudnn.benchmark row timed there would time the plain row's algorithms."""
    from helpers.speedups import CUDNN_BENCHMARK_UNMEASURED, measure_speedups, speedup_variants

    images, labels = torch.rand(4, 3, 16, 16), torch.tensor([0, 1, 2, 3])
    listed = speedup_variants("cuda")
    assert "cudnn.benchmark" in listed  # listed on CUDA, so the table says why it has no number
    # the other rows cannot run on fake CUDA (fused kernels ask the driver; channels_last converts fake parameters)
    variants = {name: listed[name] for name in ("plain step (foreach off)", "cudnn.benchmark")}
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)  # the user's setting; the plain row sets False
    with fake_cuda():
        rows = measure_speedups(
            _convnet, (images.to("cuda"), labels.to("cuda")), nn.CrossEntropyLoss(), device="cuda",
            variants=variants, rounds=1, per_round=1, startup_calls=1,
        )  # fmt: skip
    by_name = {row["name"]: row for row in rows}
    assert by_name["cudnn.benchmark"] == {"name": "cudnn.benchmark", "skipped": CUDNN_BENCHMARK_UNMEASURED}
    assert all("step_ms" in row for name, row in by_name.items() if name != "cudnn.benchmark")
    assert torch.backends.cudnn.benchmark is True
