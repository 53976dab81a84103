"""One rank of the NCCL test, launched by torchrun (tests/cuda/test_distributed.py): the gloo test's training on
this rank's GPU, recorded for the test to compare. With one process the library runs without a process group, so
the worker joins an NCCL group of one itself and wraps DDP directly: NCCL and DDP are exercised either way."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from helpers.augment import cifar_train_augment
from helpers.distributed import DistributedContext, all_reduce_sum, cleanup_distributed, init_distributed, wrap_model
from helpers.loading import DeviceTensorLoader
from helpers.seeding import rank_seed
from helpers.step import TrainStep
from tests.test_distributed import PER_RANK_BATCH, SAMPLES, STEPS, _data, _model


def main(out_dir: Path) -> None:
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # exact fp32 to compare
    context = init_distributed()  # NCCL when torchrun starts several processes on CUDA
    if context.enabled:
        model = wrap_model(_model().to(context.device), context)
    else:
        context = DistributedContext(device=torch.device("cuda", torch.cuda.current_device()))
        dist.init_process_group("nccl", device_id=context.device)
        model = nn.parallel.DistributedDataParallel(_model().to(context.device), device_ids=[context.device.index])
    torch.manual_seed(rank_seed(0, context.rank))  # per-rank augmentation draws
    images, labels = _data()
    loader = DeviceTensorLoader(
        images,
        torch.arange(SAMPLES),
        batch_size=PER_RANK_BATCH,
        device=context.device,
        augment=cifar_train_augment(),  # built on the CPU, as a user builds it: the loader moves it
        seed=7,
        rank=context.rank,
        world_size=context.world_size,
        drop_last=True,
    )
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), device=context.device)
    record = {
        "backend": dist.get_backend(),
        "world_size": context.world_size,
        "indices": [],
        "inputs": [],
        "params": [],
    }
    for number, (batch, index) in enumerate(loader):
        if number == STEPS:
            break
        step(batch, labels[index.cpu()])
        record["indices"].append(index.cpu())
        record["inputs"].append(batch.to("cpu", copy=True))
        record["params"].append([p.detach().to("cpu", copy=True) for p in model.parameters()])
    if context.enabled:
        record["reduced"] = all_reduce_sum([float(context.rank + 1)], context)
    else:
        total = torch.tensor([1.0], device=context.device)
        dist.all_reduce(total)
        record["reduced"] = total.tolist()
    torch.save(record, out_dir / f"rank{context.rank}.pt")
    cleanup_distributed()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
