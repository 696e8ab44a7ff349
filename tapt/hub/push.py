"""``push_export``: publish a tapt export folder to the HuggingFace Hub.

Phases: check (repo id, token, offline mode, then the folder: :mod:`tapt.hub.checks`; no
network) -> (``dry_run`` stops here) -> create the repository (``exist_ok``) and the branch
(``revision``) -> one commit with every file (:mod:`tapt.hub.upload`, retried where
huggingface_hub does not retry). The export folder is only read, never written, whatever
happens.

Example::

    from tapt.hub import push_export

    plan = push_export("runs/quickstart/final", "my-org/minilm-formbench", dry_run=True).plan
    result = push_export("runs/quickstart/final", "my-org/minilm-formbench", private=True)
    print(result.commit_url)
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from tapt.encoders.export_manifest import MANIFEST_FILE, is_export_folder, recorded_source
from tapt.encoders.loading import is_run_folder
from tapt.encoders.preset_record import read_record_hint
from tapt.hub.checks import PushPlan, check_export
from tapt.hub.errors import PushFailed, PushRefused
from tapt.hub.secrets_scan import known_tokens
from tapt.hub.upload import RetryPolicy, StepFailed, describe, exception_chain, with_retries
from tapt.util.ids import hub_id_problem
from tapt.util.redaction import redact

if TYPE_CHECKING:
    from huggingface_hub import CommitInfo

# huggingface_hub is imported by the functions that talk to the Hub: importing tapt.hub (for
# a dry run or a recipe check) must not import it.

logger = logging.getLogger(__name__)

DEFAULT_RETRY = RetryPolicy()
"""5 attempts, waiting 2, 4, 8 and 16 s (tests replace it)."""
DEFAULT_BRANCH = "main"


@dataclass
class PushResult:
    repo_id: str
    endpoint: str
    revision: str | None
    plan: PushPlan
    uploaded: bool = False
    commit_url: str | None = None

    @property
    def url(self) -> str:
        return f"{self.endpoint}/{self.repo_id}"


def hub_endpoint() -> str:
    """``HF_ENDPOINT`` as set now (huggingface_hub reads it once, at import), else the
    endpoint huggingface_hub was configured with."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def check_environment(repo_id: str, dry_run: bool) -> None:
    from huggingface_hub import constants

    problem = hub_id_problem(repo_id)
    if problem:
        raise PushRefused(f"repository id {repo_id!r}: expected ORG/NAME, e.g. "
                          f"my-org/qwen3-formbench, by the Hub's rules: {problem}")
    if dry_run:
        return
    if getattr(constants, "HF_HUB_OFFLINE", False):
        raise PushRefused("HF_HUB_OFFLINE is set: a push needs the Hub (unset it, or use "
                          "--dry-run)")
    from huggingface_hub import get_token

    if not get_token():
        raise PushRefused("no Hub token: set HF_TOKEN or run `hf auth login` (tapt never "
                          "takes a token as an argument)")


def check_run_push(hub) -> None:
    """Before a training run: a recipe whose ``hub`` section (``HubSettings``) pushes at the
    end needs a valid repo id and a token."""
    if hub.repo_id:
        check_environment(hub.repo_id, dry_run=False)


def push_run_export(folder: Path, hub, *, run_name: str, trust_remote_code: bool) -> None:
    """Push a run's export as its recipe's ``hub`` section says (call on the main process);
    ``run_name``: the run folder's name (the default commit message's)."""
    if not hub.repo_id:
        return
    push_export(folder, hub.repo_id, private=hub.private, revision=hub.revision,
                commit_message=hub.commit_message or f"tapt: {run_name}",
                license=hub.license, trust_remote_code=trust_remote_code)


def default_commit_message(folder: Path) -> str:
    """``tapt: NAME``, NAME being the run's folder for ``runs/NAME/final`` (as a recipe's
    push says), else the folder's own name."""
    resolved = folder.resolve()
    return f"tapt: {resolved.parent.name if resolved.name == 'final' else resolved.name}"


def recorded_remote_code(folder: Path) -> bool:
    """Whether the export's ``tapt_preset.json`` says its model runs its own code."""
    record = read_record_hint(str(folder), "read as a model that runs no code of its own")
    return bool(record and record.get("needs_remote_code"))


def check_not_run_folder(folder: Path) -> None:
    """Refuse a run folder (:func:`~tapt.encoders.loading.is_run_folder`), naming the
    export inside it, ``RUN_DIR/final``, which is what a push publishes."""
    if not is_run_folder(folder):
        return
    export = folder / "final"
    if export.is_dir():
        raise PushRefused(f"{folder}: a tapt run folder, not an export; push its export: "
                          f"tapt push {export} ...")
    raise PushRefused(f"{folder}: a tapt run folder without an export yet ({export} is "
                      "written when the run finishes); push that folder once it exists")


def check_not_serving_export(folder: Path) -> None:
    """Refuse a ``tapt export`` folder (ONNX / OpenVINO graph, ``tapt_export.json``): tapt
    push publishes SentenceTransformer folders (safetensors weights it loads and checks),
    not serving exports; name the model the export was made from."""
    if not is_export_folder(folder):
        return
    source = recorded_source(folder)
    model = f"push the model it was made from ({source})" if source else \
        "push the model it was made from"
    raise PushRefused(f"{folder}: a serving export (tapt export, {MANIFEST_FILE}); tapt push "
                      "does not publish serving exports, only a trained SentenceTransformer "
                      f"folder (a run's OUTPUT/final): {model}, or upload this folder with "
                      "huggingface_hub (hf upload REPO_ID FOLDER)")


def push_export(folder: str | os.PathLike, repo_id: str, *, private: bool | None = None,
                revision: str | None = None, commit_message: str | None = None,
                license: str = "apache-2.0", dry_run: bool = False,
                trust_remote_code: bool = False, retry: RetryPolicy | None = None
                ) -> PushResult:
    """Push the export ``folder`` to the model repository ``repo_id``.

    Args:
        private: visibility if the repository is created (None: the Hub's default); an
            existing repository keeps its visibility.
        revision: branch to commit to, created from the default branch if missing.
        license: the license the card must declare (and whose text ``LICENSE`` holds).
        dry_run: check and return the plan; no network call at all.
        trust_remote_code: let the load check run the model's own code. Off unless
            given: a stored record never turns it on (anyone who can edit the folder's
            code can edit its ``tapt_preset.json`` too); an export whose record says
            ``needs_remote_code`` is refused, before loading, with the flag to pass.
        retry: retries of the calls huggingface_hub does not retry (default 5 attempts).

    Raises:
        PushRefused: before any upload (bad id, no token, offline, a folder that fails a
            check of :func:`tapt.hub.checks.check_export`).
        PushFailed: the Hub did not take it; names the repository and the file(s).
    """
    folder = Path(folder)
    check_not_run_folder(folder)
    check_not_serving_export(folder)
    check_environment(repo_id, dry_run)
    endpoint = hub_endpoint()
    tokens = known_tokens(network=not dry_run)
    message = commit_message or default_commit_message(folder)
    if not trust_remote_code and recorded_remote_code(folder):
        raise PushRefused(f"{folder}: its tapt_preset.json records a model that runs its own "
                          "code (needs_remote_code); the load check runs it only with "
                          "--trust-remote-code (a recipe's model.trust_remote_code: true), "
                          "pass it if you trust that code")
    plan = check_export(folder, license=license, tokens=tokens, commit_message=message,
                        trust_remote_code=trust_remote_code)
    result = PushResult(repo_id=repo_id, endpoint=endpoint, revision=revision, plan=plan)
    if dry_run:
        return result
    info = upload(plan, repo_id, endpoint=endpoint, private=private, revision=revision,
                  commit_message=message, tokens=tokens, retry=retry or DEFAULT_RETRY)
    result.uploaded, result.commit_url = True, getattr(info, "commit_url", None)
    logger.info("pushed %d files to %s (%s)", len(plan.files), result.url, result.commit_url)
    return result


def upload(plan: PushPlan, repo_id: str, *, endpoint: str, private: bool | None,
           revision: str | None, commit_message: str, tokens: list[str],
           retry: RetryPolicy) -> CommitInfo:
    """Create the repository and branch if needed, then commit ``plan``'s files."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=endpoint)  # the token comes from huggingface_hub's usual places
    clean = partial(redact, extra=tokens)

    def commit():  # fresh operations each attempt: huggingface_hub mutates them
        operations = [CommitOperationAdd(path_in_repo=entry.path,
                                         path_or_fileobj=str(plan.folder / entry.path))
                      for entry in plan.files]
        return api.create_commit(repo_id, operations, commit_message=commit_message,
                                 revision=revision)

    logger.info("pushing %d files (%.1f MB) from %s to %s/%s", len(plan.files),
                plan.total_size / 1e6, plan.folder, endpoint, repo_id)
    try:
        with_retries("creating the repository",
                     lambda: api.create_repo(repo_id, private=private, exist_ok=True),
                     retry, clean=clean)
        if revision and revision != DEFAULT_BRANCH and not revision.startswith("refs/"):
            with_retries(f"creating branch {revision}",
                         lambda: api.create_branch(repo_id, branch=revision, exist_ok=True),
                         retry, clean=clean)
        return with_retries(f"committing {len(plan.files)} files", commit, retry,
                            clean=clean)
    except StepFailed as failed:
        text, files = failure_message(repo_id, failed, plan)
        raise PushFailed(clean(text), repo_id=repo_id, files=files) from failed.cause


def failure_message(repo_id: str, failed: StepFailed, plan: PushPlan) -> tuple[str, list[str]]:
    """One line naming the repository, the failing file(s) (huggingface_hub names a failed
    LFS upload in quotes) or else every file of the push, and the Hub's answer."""
    chain_text = " ".join(str(exc) for exc in exception_chain(failed.cause))
    named = [path for path in plan.paths if f"'{path}'" in chain_text]
    where = f"uploading {', '.join(named)}" if named else failed.what
    tries = f" (tried {failed.attempts} times)" if failed.attempts > 1 else ""
    text = (f"push to {repo_id} failed while {where}{tries}: {describe(failed.cause)}; "
            f"not pushed: {', '.join(plan.paths)}; {plan.folder} is unchanged")
    return " ".join(text.split()), named or plan.paths
