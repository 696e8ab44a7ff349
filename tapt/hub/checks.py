"""What tapt checks before a push, without any network call.

huggingface_hub uploads whatever it is given (it only asks the Hub to validate the card's
YAML). tapt first refuses, naming the folder or file, an export that:

- holds no safetensors weights, or pickle weights (``*.bin``, ``*.pt``, ...), or symlinks;
- has no ``LICENSE``, or one that is not the Apache-2.0 text when the license is apache-2.0;
- has no model card (``README.md``), a card whose YAML front matter does not parse, or whose
  ``license`` is not the expected one (``--license``, the recipe's ``hub.license``);
- contains a Hub token (``HF_TOKEN``, the login cache) in any file, or a commit message that
  does, or a secret (a token, a secret variable's value, a token shape) in any file's path,
  which a push would publish as a repository path;
- has no ``modules.json`` (then ``SentenceTransformer(folder)`` silently builds a default
  mean-pooling model), or lacks the tokenizer files its tokenizer is built from
  (``tokenizer.json``, or e.g. ``vocab.txt``);
- ``SentenceTransformer(folder)`` cannot load, whose tokenizer does not fit its weights
  (:func:`tapt.encoders.tokenizer_check.check_tokenizer`), or that encodes a sentence to
  non-finite values.

The result is a :class:`PushPlan`: the files with their sizes and the card, which is what
``tapt push --dry-run`` prints.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tapt.encoders.tokenizer_check import (
    TokenizerError,
    check_tokenizer,
    hf_tokenizer,
    missing_files,
)
from tapt.hub.errors import PushRefused
from tapt.hub.secrets_scan import file_containing
from tapt.util.finite import all_finite
from tapt.util.redaction import redact, secret_in

# huggingface_hub and sentence-transformers are imported where a check needs them (the card,
# check_loads): importing tapt.hub must import neither.

logger = logging.getLogger(__name__)

CARD = "README.md"
MODULES_FILE = "modules.json"
LICENSE_FILE = "LICENSE"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
IGNORED_DIRS = (".git", ".cache")
"""Not uploaded: git metadata and huggingface_hub's local-folder cache (as upload_folder)."""


@dataclass(frozen=True)
class PlannedFile:
    path: str
    """Path inside the folder and the repository, with ``/`` separators."""
    size: int


@dataclass
class PushPlan:
    """An export folder that passed every check: what a push uploads."""

    folder: Path
    files: list[PlannedFile]
    card: str
    """The model card (``README.md``) as it will be uploaded."""
    metadata: dict = field(default_factory=dict)
    """The card's YAML front matter."""

    @property
    def total_size(self) -> int:
        return sum(entry.size for entry in self.files)

    @property
    def paths(self) -> list[str]:
        return [entry.path for entry in self.files]


def list_files(folder: Path) -> list[PlannedFile]:
    """Every regular file under ``folder`` (sorted), skipping ``.git/`` and ``.cache/``;
    a symlink is refused (it could point anywhere on this machine)."""
    if not folder.is_dir():
        raise PushRefused(f"{folder}: no such folder (expected a tapt export, e.g. "
                          "runs/NAME/final)")
    files = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if relative.parts[0] in IGNORED_DIRS:
            continue
        if path.is_symlink():
            raise PushRefused(f"{path}: is a symbolic link; tapt pushes plain files only")
        if path.is_file():
            files.append(PlannedFile(relative.as_posix(), path.stat().st_size))
    return files


def check_weights(folder: Path, files: list[PlannedFile]) -> None:
    pickles = [entry.path for entry in files if entry.path.endswith(PICKLE_SUFFIXES)]
    if pickles:
        raise PushRefused(f"{folder / pickles[0]}: pickle weights are not published; a tapt "
                          "export holds safetensors weights only")
    if not any(entry.path.endswith(".safetensors") for entry in files):
        raise PushRefused(f"{folder}: no safetensors weights (*.safetensors); push a trained "
                          "SentenceTransformer folder (a run's OUTPUT/final, or a tapt merge "
                          "or soup output), not a checkpoint or an unrelated folder")


def check_license_file(folder: Path, license: str) -> None:
    path = folder / LICENSE_FILE
    if not path.is_file():
        raise PushRefused(f"{path}: missing; the export must carry its license text "
                          f"({license})")
    if license == "apache-2.0" and "Apache License" not in path.read_text(
            encoding="utf-8", errors="replace"):
        raise PushRefused(f"{path}: not the Apache-2.0 license text, but the license to "
                          "publish under is apache-2.0")


def read_card(folder: Path, license: str) -> tuple[str, dict]:
    """The card's text and front matter; refused unless it declares ``license``."""
    from huggingface_hub import ModelCard

    path = folder / CARD
    if not path.is_file():
        raise PushRefused(f"{path}: missing model card")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise PushRefused(f"{path}: not valid UTF-8 (byte {err.start + 1}); the Hub shows the "
                          "card as UTF-8 Markdown") from None
    if not text.lstrip().startswith("---"):
        raise PushRefused(f"{path}: no YAML front matter (--- ... ---) declaring the license")
    try:
        metadata = ModelCard(text).data.to_dict()
    except Exception as err:  # yaml.YAMLError, ValueError (bad model-index), ...
        raise PushRefused(f"{path}: the YAML front matter does not parse: "
                          f"{str(err).splitlines()[0] if str(err) else type(err).__name__}"
                          ) from err
    declared = metadata.get("license")
    if not isinstance(declared, str) or declared.lower() != license:
        raise PushRefused(f"{path}: front matter license is {declared!r}, expected "
                          f"{license!r} (--license, or the recipe's hub.license)")
    return text, metadata


def check_no_secret(folder: Path, files: list[PlannedFile], tokens: list[str],
                    commit_message: str | None) -> None:
    """No file's path (a repository path once pushed) or bytes, and not the commit message,
    holds a token (:func:`secret_in_path`, :func:`tapt.hub.secrets_scan.file_containing`)."""
    for entry in files:
        why = secret_in_path(entry.path, tokens)
        if why is not None:
            raise PushRefused(f"{folder / redact(entry.path, tokens)}: its path holds {why}; "
                              "a push would publish it as a repository path: rename or "
                              "remove it (and rotate the token) before publishing")
    leaked = file_containing((folder / entry.path for entry in files), tokens)
    if leaked is not None:
        raise PushRefused(f"{leaked}: contains a Hub token (HF_TOKEN or the login cache); "
                          "remove it and rotate the token before publishing")
    if commit_message and any(token in commit_message for token in tokens):
        raise PushRefused("the commit message contains a Hub token")


def secret_in_path(path: str, tokens: Sequence[str]) -> str | None:
    """What secret ``path`` holds, in words: the value of a secret variable or of one of
    ``tokens`` (the Hub tokens), or a token-shaped string (``hf_...``, ``sk-...``,
    ``pa-...``: someone's token); None when it holds none."""
    found = secret_in(path, tokens)
    return "a Hub token" if found == "a token tapt holds" else found


def read_modules(folder: Path) -> list[dict]:
    """The export's ``modules.json`` (sentence-transformers' module list); refused when
    missing or not a list of modules with a ``path``."""
    path = folder / MODULES_FILE
    if not path.is_file():
        raise PushRefused(f"{path}: missing; a SentenceTransformer export lists its modules "
                          "there (without it the model loads as plain mean pooling)")
    try:
        modules = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PushRefused(f"{path}: not valid JSON, so SentenceTransformer cannot load the "
                          f"export: {err}") from err
    if not isinstance(modules, list) or not modules or not all(
            isinstance(entry, dict) and isinstance(entry.get("path"), str)
            and isinstance(entry.get("idx", 0), int)
            and not isinstance(entry.get("idx", 0), bool) for entry in modules):
        raise PushRefused(f"{path}: expected a non-empty list of modules, each with a 'path' "
                          "(and a whole-number 'idx')")
    return modules


def check_tokenizer_of(model, folder: Path, modules: list[dict]) -> None:
    """The loaded export's tokenizer fits its weights, and the first module's folder holds
    the files that tokenizer is built from (a push must carry them)."""
    try:
        check_tokenizer(model, str(folder))
    except TokenizerError as err:
        raise PushRefused(str(err)) from err
    tokenizer = hf_tokenizer(model)
    first = min(modules, key=lambda entry: entry.get("idx", 0))
    module_folder = folder / first["path"]
    missing = missing_files(module_folder, tokenizer) if tokenizer is not None else []
    if missing:
        raise PushRefused(f"{module_folder}: no {' or '.join(missing)}; the export must carry "
                          "the files its tokenizer is built from")


def check_loads(folder: Path, trust_remote_code: bool = False,
                modules: list[dict] | None = None) -> None:
    """``SentenceTransformer(folder)`` on the CPU, from local files only, a tokenizer that
    fits its weights (with its files), and one finite embedding. A ``tapt combine`` export
    loads with tapt's own module class (:func:`tapt.encoders.lexical_branch.tapt_modules_only`:
    no code of the folder's), as its card tells users to."""
    from sentence_transformers import SentenceTransformer

    from tapt.encoders.lexical_branch import tapt_modules_only

    try:
        model = SentenceTransformer(str(folder), device="cpu", local_files_only=True,
                                    trust_remote_code=trust_remote_code
                                    or tapt_modules_only(folder))
        embedding = model.encode(["tapt push check"], convert_to_numpy=True)
    except Exception as err:
        first = str(err).splitlines()[0] if str(err) else ""
        hint = " (pass --trust-remote-code if you trust the model's own code)" \
            if "trust_remote_code" in str(err) and not trust_remote_code else ""
        raise PushRefused(f"{folder}: SentenceTransformer cannot load it: "
                          f"{type(err).__name__}: {first}{hint}") from err
    check_tokenizer_of(model, folder, modules if modules is not None else read_modules(folder))
    if not all_finite(embedding):
        raise PushRefused(f"{folder}: the model encodes to non-finite values (NaN/inf)")


def check_export(folder: Path, *, license: str = "apache-2.0", tokens: Sequence[str] = (),
                 commit_message: str | None = None, trust_remote_code: bool = False
                 ) -> PushPlan:
    """Run every check on ``folder``, cheapest first; raise :class:`PushRefused` on the first
    failure, else return what a push would upload. Nothing is written, nothing is sent."""
    folder = Path(folder)
    license = license.lower()
    files = list_files(folder)
    check_weights(folder, files)
    check_license_file(folder, license)
    card, metadata = read_card(folder, license)
    check_no_secret(folder, files, list(tokens), commit_message)
    modules = read_modules(folder)
    check_loads(folder, trust_remote_code, modules)
    logger.debug("%s: %d files pass tapt's push checks", folder, len(files))
    return PushPlan(folder=folder, files=files, card=card, metadata=metadata)
