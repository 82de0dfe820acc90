"""Data parallelism under torchrun: DDP (replicate) or FSDP2 (shard), rank-aware everything else.

Outside torchrun (no WORLD_SIZE in the environment) every function here is a no-op on a 1-rank world, so the
single-process trainer runs the same code path. Rank 0 writes logs, metrics and checkpoints; with FSDP the
full state dict is gathered onto rank 0's CPU first (a collective every rank joins).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist

from .batch import ranks_launched


# How long ranks wait for rank 0's disk (a checkpoint, the run's summary) before giving up. A collective times out
# after torch's default, 10 minutes under NCCL: enough for any all-reduce, not for writing a 1.5B model's
# 18 GB of weights and optimizer state to a slow network disk. Waits for a write go through a CPU (gloo) group
# with this timeout instead, so a hang in training is still caught at the collective timeout.
DISK_WAIT = timedelta(hours=2)


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    disk_waits: object = field(default=None, compare=False)  # the gloo group barrier() waits in

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.size > 1


def init_world(device: torch.device) -> tuple[World, torch.device]:
    size = ranks_launched()
    if size <= 1:
        return World(), device
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return World(rank, size, local, dist.new_group(backend="gloo", timeout=DISK_WAIT)), device


def close_world(world: World) -> None:
    if world.active and dist.is_initialized():
        dist.destroy_process_group()


def wrap_model(model: torch.nn.Module, world: World, fsdp: bool, device: torch.device) -> torch.nn.Module:
    """Returns the module to train with; `model` itself stays the plain module (FSDP2 shards it in place)."""
    if not world.active:
        return model
    if fsdp:
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def mean_over_ranks(value: float | torch.Tensor, world: World, device: torch.device) -> float | torch.Tensor:
    """A float comes back a float (the host waits for the all-reduce); a tensor comes back a tensor on its device,
    summed in its own dtype, and on CUDA the host does not wait: NCCL's all-reduce is queued like a kernel."""
    if not world.active:
        return value
    if isinstance(value, torch.Tensor):
        total = value.detach().reshape(1).clone()
        dist.all_reduce(total)
        return total[0] / world.size
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t.item()) / world.size


def any_rank_of(flags: tuple[bool, ...], world: World, device: torch.device) -> tuple[bool, ...]:
    """Each flag true if it is on any rank. Ranks must agree on time-based decisions (checkpoint now? stop?),
    since saving can be a collective; several flags go in one all-reduce, one wait for the host."""
    if not world.active:
        return flags
    t = torch.tensor([int(f) for f in flags], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return tuple(bool(v) for v in t.tolist())


def any_rank(flag: bool, world: World, device: torch.device) -> bool:
    return any_rank_of((flag,), world, device)[0]


def same_on_all_ranks(value, world: World):
    """Rank 0's `value` (any picklable object) on every rank: a decision a run takes once, for all its ranks."""
    if not world.active:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(world: World) -> None:
    """Every rank waits here until all arrive: where the others wait for rank 0's writes (see DISK_WAIT)."""
    if world.active:
        dist.barrier(group=world.disk_waits)


def full_state(model: torch.nn.Module, optimizer, fsdp: bool) -> tuple[dict, dict]:
    """(model state dict, optimizer state dict) with whole tensors on CPU, whatever the wrapping."""
    if not fsdp:
        return model.state_dict(), optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    return get_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def load_optimizer_state(model: torch.nn.Module, optimizer, state: dict, fsdp: bool) -> None:
    if not fsdp:
        optimizer.load_state_dict(state)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))
