"""Publish tapt exports to the HuggingFace Hub (``tapt push``, a recipe's ``hub:`` section).

huggingface_hub does the transfer (repository and branch creation, ``preupload``, LFS or Xet
uploads, the commit, authentication from ``HF_TOKEN`` or ``hf auth login``). tapt adds, before
anything leaves the machine, the refusals of :mod:`tapt.hub.checks` (weights, LICENSE, card
and its license, a token in any file, a model that does not load), a dry run with no network
call, ``HF_ENDPOINT`` read when the push runs, and retries of the calls huggingface_hub sends
only once (:mod:`tapt.hub.upload`).
"""

from tapt.hub.checks import PushPlan, check_export
from tapt.hub.errors import PushFailed, PushRefused
from tapt.hub.push import PushResult, push_export
from tapt.hub.upload import RetryPolicy

__all__ = ["PushFailed", "PushPlan", "PushRefused", "PushResult", "RetryPolicy",
           "check_export", "push_export"]
