"""Run by ``torchrun --nproc_per_node 2`` in test_fsdp_in_loop.py: shard a SentenceTransformer
with FSDP2 (``fully_shard`` on each BertLayer and the root, gloo on CPU), run tapt's in-loop
RetrievalEvaluator on every rank and record, per rank, the metrics, the forward passes of
the sharded units and the padding forwards tapt added (tapt.encoders.collective)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch.distributed as dist
from sentence_transformers import SentenceTransformer
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard

from tapt.data.beir import load_beir_folder
from tapt.encoders import st_inference
from tapt.retrieval.in_loop import RetrievalEvaluator

model_path, data_path, record_file = sys.argv[1], sys.argv[2], Path(sys.argv[3])
max_tokens = int(sys.argv[4])
dist.init_process_group("gloo")
rank = dist.get_rank()
model = SentenceTransformer(model_path, device="cpu")
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
for module in list(model.modules()):
    if type(module).__name__ == "BertLayer":
        fully_shard(module, mesh=mesh)
fully_shard(model, mesh=mesh)
units = [m for m in model.modules() if isinstance(m, FSDPModule)]
forwards = [0]
units[0].register_forward_pre_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
padding = []
agree = st_inference.padding_forwards


def recorded_padding(model, batches):
    extra = agree(model, batches)
    padding.append([batches, extra])
    return extra


st_inference.padding_forwards = recorded_padding
dataset = load_beir_folder(data_path, ["dev"])
evaluator = RetrievalEvaluator(dataset, "dev", list(dataset.corpus), batch_size=4,
                               dtype="float32", max_tokens_per_batch=max_tokens)
metrics = evaluator(model)
record = {"rank": rank, "world_size": dist.get_world_size(), "units": len(units),
          "forwards": forwards[0], "padding": padding, "metrics": metrics}
record_file.with_name(f"{record_file.stem}{rank}.json").write_text(json.dumps(record))
dist.destroy_process_group()
# Leave without interpreter finalization: with FSDP2 on gloo, about one run in twenty
# aborted *after* destroy_process_group and the atexit handlers ("terminate called without
# an active exception", SIGABRT, torch 2.13 CPU: the C++ runtime's message for a
# std::thread destroyed while still joinable). Everything it records is written above.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
