"""Data-parallel processes started by `torchrun`: which one this is, and the few collectives a
training loop needs so that every process takes the same decisions (stop, resume, report).

Without torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK) this is one process and every
collective returns its input, so a plain `python -m tasks.pretrain` runs the same code.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from gpt1.training.device import resolve_device

T = TypeVar("T")


@dataclass(frozen=True)
class Group:
    """This process's place among `world_size` data-parallel ones; rank 0 is the one that writes."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0  # the process's index on its machine: its GPU

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def parallel(self) -> bool:
        return self.world_size > 1

    def device(self, name: str) -> torch.device:
        """What `name` resolves to, except that with several processes on CUDA each one takes
        the GPU of its local rank (whatever index `name` gives: one GPU per process)."""
        device = resolve_device(name)
        if device.type == "cuda" and self.parallel:
            return torch.device("cuda", self.local_rank)
        return device

    def rows(self, batch_size: int) -> slice:
        """This process's rows of a global batch of `batch_size` (a multiple of `world_size`)."""
        share = batch_size // self.world_size
        return slice(self.rank * share, (self.rank + 1) * share)

    def mean(self, value: float) -> float:
        """The mean of every process's `value`."""
        return self.means([value])[0]

    def means(self, values: list[float]) -> list[float]:
        """Element by element, the mean of every process's `values` (each the same length), in
        one collective however many there are."""
        if not self.parallel:
            return values
        return [total / self.world_size for total in _all_reduce(values, dist.ReduceOp.SUM)]

    def max(self, value: float) -> float:
        """The largest of every process's `value`."""
        return _all_reduce([value], dist.ReduceOp.MAX)[0] if self.parallel else value

    def gather(self, obj: T) -> list[T]:
        """Every process's `obj` (picklable), in rank order, on every process."""
        if not self.parallel:
            return [obj]
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, obj)
        return gathered

    def from_main(self, obj: T) -> T:
        """Rank 0's `obj` on every process; the others wait here until rank 0 arrives, which
        makes it a barrier behind whatever rank 0 did first (a checkpoint written to disk)."""
        if not self.parallel:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]


SINGLE = Group()


def from_env(env: Mapping[str, str] = os.environ) -> Group:
    """The group torchrun describes in the environment; one process when it is not set."""
    return Group(rank=int(env.get("RANK", 0)), world_size=int(env.get("WORLD_SIZE", 1)),
                 local_rank=int(env.get("LOCAL_RANK", 0)))


@contextlib.contextmanager
def process_group(device_name: str) -> Iterator[Group]:
    """Join torchrun's processes for the duration (NCCL when `device_name` resolves to CUDA,
    gloo on the CPU), each on the GPU of its local rank; one process: nothing to join."""
    group = from_env()
    if not group.parallel:
        yield group
        return
    device = group.device(device_name)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=group.rank,
                            world_size=group.world_size)
    try:
        yield group
    finally:
        dist.destroy_process_group()


def _all_reduce(values: list[float], op: dist.ReduceOp) -> list[float]:
    # NCCL reduces CUDA tensors only; float64 keeps a mean of float32 losses exact to their digits
    device = (torch.device("cuda", torch.cuda.current_device())
              if dist.get_backend() == "nccl" else torch.device("cpu"))
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=op)
    return tensor.tolist()
