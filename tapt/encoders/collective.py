"""Equal forward counts on every rank for a sharded (FSDP) model.

Under FSDP (FSDP2 ``fully_shard`` or FSDP1 ``FullyShardedDataParallel``) a forward pass is
collective: each sharded unit all-gathers its parameters from every rank. When each rank
encodes its own share of texts (:mod:`tapt.retrieval.sharding`), token-budget batching can
give the ranks different numbers of batches, and the rank with more would wait forever for
the others. :func:`padding_forwards` agrees on the largest count (one all-reduce before the
first forward) and tells each rank how many extra, discarded forwards to make. Without a
process group, or with an unsharded model (DDP, one process), it is 0 and talks to no one.
Limit: a rank with no text at all never reaches the encoder; shares are empty only when
there are fewer texts than ranks.
"""

from __future__ import annotations

import sys


def is_sharded(model) -> bool:
    """Whether any module of ``model`` is an FSDP unit (FSDP2 or FSDP1)."""
    if "torch.distributed" not in sys.modules:
        return False
    from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel

    return any(isinstance(m, (FSDPModule, FullyShardedDataParallel)) for m in model.modules())


def padding_forwards(model, batches: int) -> int:
    """Extra forwards this rank makes so that every rank makes as many as the busiest.

    Collective when ``model`` is sharded and a process group is initialised: every rank
    must call it before its first forward of the same encoding."""
    if "torch.distributed" not in sys.modules:
        return 0
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or not is_sharded(model):
        return 0
    device = (torch.device("cuda", torch.cuda.current_device())
              if dist.get_backend() == "nccl" else torch.device("cpu"))
    most = torch.tensor([batches], dtype=torch.int64, device=device)
    dist.all_reduce(most, op=dist.ReduceOp.MAX)
    return int(most.item()) - batches
