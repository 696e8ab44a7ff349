"""Splitting an encoding across DDP ranks and gathering it on rank 0.

Under ``torchrun``/``accelerate launch`` every rank holds the same texts; each encodes an
interleaved share of them (balanced in length) with its own fast encoding path, and the
embeddings are gathered on rank 0, which searches and scores. sentence-transformers'
distributed evaluation instead has rank 0 hand ``encode`` calls to the other ranks, which
would bypass tapt's token-budget encoding.
"""

from __future__ import annotations

import sys

import numpy as np

# torch.distributed is imported where ranks talk: importing tapt must not import torch.

GATHER_ROWS = 16384
"""Rows per collective when gathering embeddings (bounds the temporary buffers)."""


def world() -> tuple[int, int]:
    """``(rank, world_size)`` of the initialised process group, else ``(0, 1)`` (without
    importing torch when nothing imported ``torch.distributed``: no group can exist then)."""
    if "torch.distributed" not in sys.modules:
        return 0, 1
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def share(lengths: np.ndarray, rank: int, world_size: int) -> np.ndarray:
    """The positions rank ``rank`` encodes: every ``world_size``-th text by length."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return np.sort(order[rank::world_size])


def _device():
    import torch
    import torch.distributed as dist

    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_sum(values: list[int]) -> list[int]:
    """Sum integers over ranks (identity without a process group)."""
    import torch
    import torch.distributed as dist

    if world()[1] == 1:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.int64, device=_device())
    dist.all_reduce(tensor)
    return [int(v) for v in tensor.tolist()]


def gather_rows(positions: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Every rank's ``(positions, rows)`` concatenated on rank 0; None on other ranks.

    Collective: every rank must call it. Rows are float32 ``(n, dim)``; ``n`` may differ.
    """
    import torch
    import torch.distributed as dist

    rank, size = world()
    if size == 1:
        return positions, rows
    device = _device()
    counts = torch.zeros(size, dtype=torch.int64, device=device)
    counts[rank] = len(positions)
    dist.all_reduce(counts)
    counts_list = [int(c) for c in counts.tolist()]
    longest, dim = max(counts_list), rows.shape[1]
    gathered_positions, gathered_rows = [[] for _ in range(size)], [[] for _ in range(size)]
    for start in range(0, longest, GATHER_ROWS):
        stop = min(start + GATHER_ROWS, longest)
        piece = np.zeros((stop - start, dim + 1), dtype=np.float64)
        mine = rows[start:stop]
        piece[:len(mine), :dim] = mine
        piece[:len(mine), dim] = positions[start:stop]
        local = torch.from_numpy(piece).to(device)
        parts = [torch.empty_like(local) for _ in range(size)]
        dist.all_gather(parts, local)
        if rank == 0:
            for source, part in enumerate(parts):
                valid = max(0, min(stop, counts_list[source]) - start)
                block = part[:valid].cpu().numpy()
                gathered_rows[source].append(block[:, :dim].astype(np.float32))
                gathered_positions[source].append(block[:, dim].astype(np.int64))
    if rank != 0:
        return None
    return (np.concatenate([p for parts in gathered_positions for p in parts]),
            np.concatenate([r for parts in gathered_rows for r in parts]))


def broadcast(value):
    """Rank 0's ``value`` on every rank (identity without a process group)."""
    import torch.distributed as dist

    if world()[1] == 1:
        return value
    holder = [value]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]


def broadcast_rows(rows: np.ndarray) -> np.ndarray:
    """Rank 0's float32 ``rows`` on every rank (identity without a process group).

    Collective: every rank must call it with an array of the same shape (other ranks'
    values are ignored): analyses then compute the same figures on every rank.
    """
    import torch
    import torch.distributed as dist

    if world()[1] == 1:
        return rows
    tensor = torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32)).to(_device())
    dist.broadcast(tensor, src=0)
    return tensor.cpu().numpy()
