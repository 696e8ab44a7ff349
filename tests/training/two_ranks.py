"""Launch a command on 2 CPU processes (gloo) with torchrun, as the DDP tests do."""

from __future__ import annotations

import os
import subprocess
import sys


def torchrun_two(args: list[str], port: int) -> subprocess.CompletedProcess:
    """``python -m torch.distributed.run --nproc_per_node 2 --master_port PORT ARGS``,
    offline, one thread a rank; the finished process (output captured, not checked)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
         "--master_port", str(port), *args],
        env=env, capture_output=True, text=True, timeout=600, check=False)
