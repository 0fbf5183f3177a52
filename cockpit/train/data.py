"""Data loading that shards across ranks and can resume in the middle of an epoch.

The order of samples is a pure function of (seed, epoch, rank, world size): ``ShardSampler`` is torch's
``DistributedSampler`` (shuffled with ``seed + epoch``) plus a ``start`` offset, so a resumed run skips the
samples its checkpoint already consumed without loading them. The loader gets its own ``torch.Generator``,
so creating an iterator never draws from the global RNG (that would shift dropout & co. after a resume).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class ShardSampler(DistributedSampler):
    """DistributedSampler that can start ``start`` samples into this rank's shard of the current epoch."""

    def __init__(self, dataset: Dataset, *, num_replicas: int, rank: int, shuffle: bool, seed: int,
                 drop_last: bool = False) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed,
                         drop_last=drop_last)
        self.start = 0

    def set_position(self, epoch: int, start: int) -> None:
        """Shuffle for ``epoch`` and begin ``start`` samples into this rank's shard."""
        self.set_epoch(epoch)
        self.start = max(0, start)

    def __iter__(self) -> Iterator[int]:
        indices = list(super().__iter__())
        return iter(indices[self.start:])

    def __len__(self) -> int:
        return max(0, self.num_samples - self.start)


def make_loader(dataset: Dataset, *, batch_size: int, rank: int, world_size: int, seed: int,
                shuffle: bool = True, drop_last: bool = False, **kwargs: Any) -> DataLoader:
    """A DataLoader over this rank's shard; ``kwargs`` go to DataLoader (num_workers, pin_memory, ...)."""
    for reserved in ("sampler", "shuffle", "batch_sampler", "generator"):
        if reserved in kwargs:
            raise TypeError(
                f"rt.loader(): {reserved}= is set by the runtime (it shards and resumes the data); "
                "hint: pass shuffle=True/False, or build your own DataLoader and skip resume support"
            )
    sampler = ShardSampler(dataset, num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=drop_last,
                      generator=generator, **kwargs)


def shard_sampler(loader: DataLoader) -> ShardSampler:
    """The loader's ShardSampler, or a TypeError saying the loader must come from rt.loader()."""
    sampler = loader.sampler
    if not isinstance(sampler, ShardSampler):
        raise TypeError(
            "rt.batches() needs a loader made by rt.loader(); "
            f"this one samples with {type(sampler).__name__}; "
            "hint: build it with rt.loader(dataset, batch_size=...)"
        )
    return sampler


def to_device(batch: Any, device: torch.device) -> Any:
    """Move the tensors of a batch (tensor, tuple, list or dict of them) to ``device``; others pass."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=device.type == "cuda")
    if isinstance(batch, Mapping):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple takes positional fields
        return type(batch)(*(to_device(v, device) for v in batch))
    if isinstance(batch, tuple | list):
        return type(batch)(to_device(v, device) for v in batch)
    return batch
